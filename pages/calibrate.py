import streamlit as st
st.title("calibrate")

import streamlit as st
st.title("review")

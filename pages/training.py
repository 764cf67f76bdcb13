import streamlit as st
st.title("training")

"""personas"""

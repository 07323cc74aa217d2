"""town"""

"""Prompt texts and the small composer that assembles them."""

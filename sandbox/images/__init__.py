"""Sandbox images: templates, image settings, the offline base image and the builder."""

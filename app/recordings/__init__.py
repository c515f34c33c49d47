"""Recorded model answers: the stream formats `kiln parse` and the replay provider read, and
materializing a stream's files into a folder.
"""

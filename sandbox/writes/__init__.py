"""The write path: the Redis write buffer, locked flushes in one tar, file events, fence cleanup,
template file rules.
"""

"""Running things in a sandbox: the command policy (data), commands, streamed exec output, the
serial install queue.
"""

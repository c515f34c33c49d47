"""Docker objects of one sandbox: the boundary every Docker call goes through, hardened run
settings, labels, networks, provisioning.
"""

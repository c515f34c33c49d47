"""The agent runtime: one run from a user's message to a finished set of files.

``loop.AgentRun`` streams the provider, feeds the parser, hands every event to the sandbox
session and the web tools as it arrives, asks ``app.agent.turn_outcome`` after each turn,
checkpoints, and ends with post-generation (validation, fixes, build, fix-up turns).
"""

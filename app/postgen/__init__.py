"""Post-generation: deterministic fixes written to the sandbox, validation of the files, the build
and its findings for fix-up turns.
"""

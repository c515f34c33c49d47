"""Docker sandboxes for generated apps. Knows nothing about LLMs; never imports ``app``."""

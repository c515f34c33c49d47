"""``python -m app`` runs the ``kiln`` command line."""

import sys

from app.cli import main

sys.exit(main())

"""``python -m proxima ...``: the ``proxima`` command."""

import sys

from proxima.cli import console

sys.exit(console())

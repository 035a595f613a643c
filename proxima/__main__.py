"""``python -m proxima ...``: the ``proxima`` command."""

import sys

from proxima.commands import console

sys.exit(console())

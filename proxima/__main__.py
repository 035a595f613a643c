"""``python -m proxima ...``: the ``proxima`` command."""

import sys

from proxima.cli import main

sys.exit(main())

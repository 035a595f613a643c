"""``python -m proxima.commands ...``: the ``proxima`` command, as ``python -m proxima`` (without its
collector freeze: ``console``)."""

import sys

from proxima.commands import main

sys.exit(main(own_process=True))

"""The one exception type that means "the user asked for something we cannot do".

The CLI turns it into a single line on stderr and exit status 2; the Python API lets it propagate.
"""


class UserError(ValueError):
    """Bad input from the user: the message names the bad value and what is accepted."""

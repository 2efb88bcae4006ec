"""One exception type for user-facing input errors.

Anything raised as a `UserError` is printed by the CLI as a single line (no traceback):
bad input should tell the user which file and field are wrong and what to do.
"""


class UserError(Exception):
    """Bad input: a malformed claim, tier or config, or missing data. Printed as one line."""

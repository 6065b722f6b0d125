"""The one exception type for user mistakes (a one-line message and exit code 2), and the one for
a case outside the contract. Both are light: the supervising process imports them without torch."""


class UserError(Exception):
    """A mistake in what the user gave us (an option, a file, a field), never a bug of ours.

    The message is one line that names the file or option, the field and the rule broken.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class ContractViolation(ValueError):
    """A case outside the contract: ``field`` names the offending input, ``rule`` the rule."""

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule

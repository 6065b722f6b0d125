"""The one exception type for user mistakes: it becomes a one-line message and exit code 2."""


class UserError(Exception):
    """A mistake in what the user gave us (an option, a file, a field), never a bug of ours.

    The message is one line that names the file or option, the field and the rule broken.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))

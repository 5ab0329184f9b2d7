"""Errors that reach the user as one clear line and a non-zero exit code."""


class UserError(Exception):
    """Bad input or a missing prerequisite: printed as ``relay: <message>``, exit code 2."""

    exit_code = 2


class ModelMissing(UserError):
    def __init__(self, pack_id: str, detail: str = "is not installed"):
        super().__init__(f"model pack '{pack_id}' {detail}; install it with: relay models install {pack_id}")
        self.pack_id = pack_id


class ModelDamaged(UserError):
    def __init__(self, pack_id: str, detail: str):
        super().__init__(
            f"model pack '{pack_id}' is damaged ({detail}); reinstall it with: relay models install --force {pack_id}"
        )
        self.pack_id = pack_id

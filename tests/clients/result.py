"""What a client run returned, and the exception its `check()` raises when the run failed.

Shared by the kubectl, Helm and Flux wrappers. Each client keeps its own result and exception class (the names
tests.clients exports), so a test catches the failure of the client it means and the message names that client.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

R = TypeVar("R", bound="ClientResult")


class CommandFailed(RuntimeError):
    """A client run that failed; `result` is what it returned. A subclass per client sets `tool`, the name the
    message starts with, or words the message itself in describe()."""
    tool: ClassVar[str] = "command"

    def __init__(self, result: Any):
        self.result = result
        super().__init__(self.describe(result))

    def describe(self, result: Any) -> str:
        return f"{self.tool} {' '.join(result.args)} exited {result.returncode}: {result.stderr.strip()}"


class ClientResult:
    """`ok` says whether the run succeeded; check() returns the result when it did and raises the client's
    `failure` when it did not, so a test can write `client.run(...).check().stdout`."""
    failure: ClassVar[type[CommandFailed]] = CommandFailed

    @property
    def ok(self) -> bool:
        raise NotImplementedError

    def check(self: R) -> R:
        if not self.ok:
            raise self.failure(self)
        return self


@dataclass(frozen=True)
class CommandResult(ClientResult):
    """A command line client's run: the arguments it was given (without the connection flags the wrapper adds),
    its exit code and its output."""
    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

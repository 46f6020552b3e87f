"""Fair scheduling of a partition's commands: new client commands keep being served while follow-ups never end.

The stream processor processes commands strictly in log order: the processed position is a watermark (every command
at or below it was processed), which is what replay relies on to find the commands still to process after a restart.
Follow-ups are in the log the moment they are written; a client command gets its position when it is admitted to the
log. If client commands were only admitted once no follow-up is queued, a chain of follow-ups that never ends (a
signal start event whose instance broadcasts the same signal, a process calling itself) would keep every client out.

So, as Zeebe does by appending client commands to the log as they arrive, a round that begins with follow-ups still
queued first admits a share of the waiting client commands to the log, behind those follow-ups: they are processed
in log order within a few rounds while the chain goes on, and the watermark stays a watermark. With nothing queued, a
client command is admitted and processed at once, as before.

A client command admitted but not yet processed when this replica stops leading stays in the log and is processed by
the next leader; its requester was on this replica, so the response must not go to a request of the new leader that
happens to carry the same id: only commands this scheduler admitted keep their request metadata.
"""

from __future__ import annotations

from typing import Final

from broker.protocol.record import Record

# A round that begins with follow-ups queued admits up to this share of its command budget from the inbox.
ADMIT_SHARE: Final = 4


class FairTake:
    """Decides how many client commands a round admits ahead of its queue, and which queued commands were admitted
    by this replica (so their responses go to a requester waiting here)."""

    def __init__(self, max_commands_per_round: int) -> None:
        self.admit_per_round = max(1, max_commands_per_round // ADMIT_SHARE)
        self._admitted: dict[int, Record] = {}  # position → client command admitted here, not yet processed

    def admissions(self, queued: int, waiting: int) -> int:
        """How many of the ``waiting`` client commands to admit at the start of a round with ``queued`` follow-ups
        (with none queued, the round admits them one by one as it goes)."""
        return min(waiting, self.admit_per_round) if queued else 0

    def admitted(self, command: Record) -> None:
        """``command`` got its position in the log here and waits in the queue behind the follow-ups before it (one
        without a requester, a checker's, is not remembered: nobody waits for its response)."""
        if command.request is not None:
            self._admitted[command.position] = command

    def taken(self, command: Record) -> Record:
        """``command`` is about to be processed: a client command admitted elsewhere (by an earlier leader, or before
        a restart) is processed without its request metadata, since no requester waits for it here.

        The core calls it only for queued commands with a request: a follow-up has none, and a client command
        admitted with nothing queued is processed at once, never queued."""
        if command.request is not None and self._admitted.pop(command.position, None) is not command:
            command.request = None
        return command

    def forget_until(self, processed_position: int) -> None:
        """Drop admissions the log has moved past (processed here or by another leader)."""
        if self._admitted:
            self._admitted = {p: c for p, c in self._admitted.items() if p > processed_position}

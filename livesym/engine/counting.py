"""Stored samples counted into a profile in groups: the same counts as feeding them
one by one, in a fraction of the time (a million samples load in about a second).

Used for a recording's rows as they are replayed, and for a live session's stored
samples when its frames were renamed (a debug file arrived) and every view is
counted again. ``Counted`` holds what a session counted since its last reset.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from livesym.capture.reader import paused_gc
from livesym.engine.folding import COARSE_AFTER, COARSE_BUCKET, DETAIL_SECONDS, FINE_BUCKET
from livesym.engine.tables import SessionTables
from livesym.profile import HotAddress, Profile, ProfileView, StackCounts, StackSample
from livesym.profile.stack_counts import recent_stack_counts
from livesym.records import IDLE_FLAG, KIND_TRUNCATED, Frame, TimeMode
from livesym.sampling.base import Row

Group = tuple[int, int, int]  # (tid, stack id, flags)


@dataclass(frozen=True, slots=True)
class Stored:
    """Samples just stored in the tables: as the profile counts them (each with its
    stack id; none made for a deferred session), their weight and how much of it had
    stacks cut short."""

    stacks: list[tuple[StackSample, int]]
    weight: int
    cut: int


def cut_short(frames: tuple[Frame, ...]) -> bool:
    """Whether a stack ended early: its outermost frame says so."""
    return bool(frames) and frames[-1].kind == KIND_TRUNCATED


def count_rows(
    rows: list[Row],
    start: float,
    cutoff: float,
    profile: Profile,
    counts: StackCounts,
    frames_of: Callable[[int], tuple[Frame, ...]],
    thread_name: Callable[[int], str],
    process_of: Callable[[int], tuple[int, str]] = lambda tid: (0, ""),
) -> int:
    """Count ``rows`` (times from ``start``); return how many had stacks cut short.
    ``process_of`` gives each thread's process (pid, name).

    Samples are grouped by (thread, stack, flags) and added with their weights summed;
    those at or after ``cutoff`` (inside the recent window) go in as one group each at
    their latest time, the rest outside it.
    """
    old: Counter[Group] = Counter()
    recent: dict[Group, list[float]] = {}
    for t, tid, sid, f, w in rows:
        if t < cutoff:
            old[(tid, sid, f)] += w
        else:
            entry = recent.setdefault((tid, sid, f), [t, 0])
            entry[0] = max(entry[0], t)
            entry[1] += w
    counts.add((tid, bool(f & IDLE_FLAG), sid, n) for (tid, sid, f), n in old.items())
    counts.add((tid, bool(f & IDLE_FLAG), sid, int(n)) for (tid, sid, f), (_, n) in recent.items())
    profile.add(
        (
            StackSample(
                start,
                tid,
                thread_name(tid),
                frames_of(sid),
                bool(f & IDLE_FLAG),
                n,
                *process_of(tid),
                f,
            )
            for (tid, sid, f), n in old.items()
        ),
        recent=False,
        grouped=True,
    )
    profile.add(
        (
            StackSample(
                start + t,
                tid,
                thread_name(tid),
                frames_of(sid),
                bool(f & IDLE_FLAG),
                int(n),
                *process_of(tid),
                f,
            )
            for (tid, sid, f), (t, n) in recent.items()
        ),
        grouped=True,
    )
    profile.log_rows(rows, start, frames_of)
    cut = sum(n for (_, sid, _), n in old.items() if cut_short(frames_of(sid)))
    return cut + sum(int(n) for (_, sid, _), (_, n) in recent.items() if cut_short(frames_of(sid)))


FOLD_PERIOD = 2.0  # seconds between folds of a live session's old samples
MAX_DETAIL = 60.0  # seconds of a flight recorder's window kept a sample each, at most
MAX_VIEWS = 16  # views kept for reuse while nothing new is counted (filters toggled back)


class Counted:
    """What a session counted since its last reset: the profile, the per-stack counts,
    how many samples and how many of them cut short, and the views made of them (a
    finished session, a replay above all, is asked for the same views several times a
    second). ``epoch`` changes whenever what was counted is dropped."""

    def __init__(
        self,
        tables: SessionTables,
        recent_window: float,
        thread_name: Callable[[int], str],
        process_of: Callable[[int], tuple[int, str]],
    ) -> None:
        self._tables = tables
        self.profile = Profile(recent_window)
        self.counts = StackCounts(tables.stacks, tables.frames, tables.profile_frame)
        self._thread_name = thread_name
        self._process_of = process_of
        self.samples = 0  # samples counted since the last reset
        self.cut = 0  # of those, samples whose stack ended early
        self.epoch = 0
        self._folded = 0.0  # when old samples were last folded
        self.keep_last: float | None = None  # a flight recorder's seconds (record --keep-last)
        self._views: OrderedDict[tuple[object, ...], ProfileView] = OrderedDict()
        # Counted when a view is asked for, not as they come (``deferred``): what was
        # stored since is not in the profile yet.
        self.deferred = False
        self._behind = False

    def add(self, stored: Stored) -> None:
        """Samples just resolved and stored (a deferred session's are counted later)."""
        self.samples += stored.weight
        self.cut += stored.cut
        if self.deferred:
            self._behind = True
            return
        stacks = stored.stacks
        self.profile.add(s for s, _ in stacks)
        self.counts.add((s.tid, s.idle, stack_id, s.weight) for s, stack_id in stacks)

    def caught_up(self, start: float, now: float) -> Counted:
        """This, with every stored sample counted (a deferred session's, when asked)."""
        if self._behind:
            self._recount(start, now)
        return self

    def add_rows(self, rows: list[Row], start: float, now: float) -> None:
        """Stored samples (times from ``start``), in groups (``count_rows``)."""
        cutoff = now - start - self.profile.recent_window
        with paused_gc():
            self.cut += count_rows(rows, start, cutoff, self.profile, self.counts,
                                   self._tables.frames_of, self._thread_name,
                                   self._process_of)  # fmt: skip
        self.samples += sum(row[4] for row in rows)

    def recount(self, start: float, now: float) -> None:
        """Count the stored samples since the last reset again, with their frames as
        named now (debug files arrived: names appear in every view, old samples too);
        a deferred session's when it is next asked."""
        if self.deferred:
            self._behind = True
        else:
            self._recount(start, now)

    def _recount(self, start: float, now: float) -> None:
        self._drop()
        self.counts.forget_functions()
        s, first = self._tables.samples, self._tables.folds.counted_start()
        times = [t - start for t in s.times[first:]]  # stored on the clock; counted from start
        self.add_rows(list(zip(times, s.tids[first:], s.stack_of[first:], s.flags[first:],
                               s.weights[first:], strict=True)), start, now)  # fmt: skip

    def fold(self, now: float, start: float, written: int | None) -> None:
        """Every FOLD_PERIOD, fold the stored samples and the profile's log where they
        aged (``engine.folding``; not past ``written``, what a recording wrote)."""
        if now - self._folded < FOLD_PERIOD:
            return
        self._folded = now
        keep = self.keep_last
        # A flight recorder's window is kept a sample each where it is short.
        detail = DETAIL_SECONDS if keep is None else max(DETAIL_SECONDS, min(keep, MAX_DETAIL))
        with paused_gc():
            if keep is not None and written is None:
                self._tables.forget(now - keep)
                self.profile.log.forget(now - keep)
            self._tables.fold(now, start, written, detail)
            self.profile.log.fold(now - detail, now - COARSE_AFTER, start,
                                  FINE_BUCKET, COARSE_BUCKET)  # fmt: skip

    def reset(self) -> None:
        """Forget the samples counted so far (the tables keep them)."""
        self._drop()
        self._tables.count_from_next()

    def _drop(self) -> None:
        self.profile.reset()
        self.counts.reset()
        self.samples = self.cut = 0
        self.epoch += 1
        self._views.clear()
        self._behind = False

    def hot_addresses(
        self, frame: Frame, limit: int, span: tuple[float, float] | None, thread: int | None,
        mode: TimeMode, among: frozenset[int] | None, module: str | None,
    ) -> list[HotAddress]:  # fmt: skip
        """Where in ``frame`` the samples were: those the counts select, or those of the
        moments in ``span`` (from, to: the recent window or a range)."""
        if span is not None:
            t = self._tables
            recents = recent_stack_counts(t.samples, t.folds.counted_start(), span[0], thread,
                                          mode, among, span[1])  # fmt: skip
            count: Callable[[int], int] = recents.__getitem__  # a Counter: 0 when missing
        else:
            count = self.counts.selected(thread, mode, among)
        return self.counts.hot_addresses(frame, limit, count, module)

    def view(
        self,
        now: float,
        *,
        recent: bool,
        thread: int | None,
        module: str | None,
        mode: TimeMode,
        process: int | None,
        between: tuple[float, float] | None = None,
        period: float = 0.0,
    ) -> ProfileView:
        """The profile's view (``Profile.view``'s selection) as of ``now``, made once
        while nothing new is counted."""
        key = (recent, thread, module, mode, process, self.samples, self.epoch,
               now if recent else None, between)  # fmt: skip
        view = self._views.get(key)
        if view is None:
            view = self.profile.view(recent=recent, now=now, thread=thread, module=module,
                                     mode=mode, process=process, between=between,
                                     period=period)  # fmt: skip
            self._views[key] = view
            if len(self._views) > MAX_VIEWS:
                self._views.popitem(last=False)
        else:
            self._views.move_to_end(key)
        return view

"""View 3's verify (``v``): every shard's header against its entry's manifest, as ``cache verify``,
in a worker; what it found, said in a notification and kept for the detail pane.

Why a module of its own: the cache view scans, lists and explains; this mixin reads the
entries it is given (read-only: allowed in read-only mode too) and words the outcome. The view
keeps ``_verified`` (key → the manifest mtime it was verified at and the verdict, shown in the
detail pane while that manifest stays) and its ``v`` action, which picks the entries (the
marked ones, or the one under the cursor) and calls :meth:`EntryVerify.verify`.
"""

from __future__ import annotations

from textual import work

from fvconsole.core.cache import CacheEntry, EntryVerification, verify_entry
from fvconsole.tui.messages import CacheVerified


class EntryVerify:
    """The verify of :class:`~fvconsole.tui.cache.view.CacheView`: its worker and its outcome."""

    _verified: dict[str, tuple[int | None, EntryVerification]]

    @work(thread=True, exclusive=True, group="cache-verify", exit_on_error=False)
    def verify(self, entries: tuple[CacheEntry, ...]) -> None:
        with self.failures():
            results = tuple(verify_entry(e.path, e.key, is_symlink=e.is_symlink) for e in entries)
            self.deliver(CacheVerified(results, {e.key: e.manifest_mtime_ns for e in entries}))

    def on_cache_verified(self, message: CacheVerified) -> None:
        for result in message.results:
            self._verified[result.key] = (message.stamps.get(result.key), result)
        bad = [r for r in message.results if r.failed]
        apart = sum(r.not_verifiable is not None for r in message.results)
        checked = len(message.results) - apart
        unverifiable = f"; {apart} not verifiable (no manifest.json yet, or empty)" if apart else ""
        if bad:
            first = bad[0].problems[0].text()
            self.notify(f"{len(bad)} of {checked} failed verification: "
                        + ", ".join(r.key for r in bad[:3]) + (" …" if len(bad) > 3 else "")
                        + f"; first: {first} (the entry's detail lists every problem){unverifiable}", severity="error")
        elif checked:
            self.notify(f"verified {checked}: every shard agrees with its manifest{unverifiable}", timeout=4)
        else:
            self.notify(f"not verifiable: {message.results[0].not_verifiable}" if apart == 1
                        else f"none of {apart} is verifiable (no manifest.json yet, or empty)",
                        severity="warning", timeout=4)
        self._refresh_detail()

"""The Session menu's choices that a session's options carry: Profanity (`relay run
--profanity`) and Final translation (`--final-mt`), kept in the settings file. A mixin of the main
window (it uses ``settings``, ``controller``, ``set_status`` and the menu's actions)."""

from __future__ import annotations

from app.core.profanity import DEFAULT_MODE as PROFANITY_DEFAULT
from app.core.profanity import MODES as PROFANITY_MODES
from app.ui.choices import FINAL_MT_LABELS, final_mt_installed


class SessionChoicesMixin:
    def profanity(self) -> str:
        """The profanity setting (Session → Profanity); a corrupt stored value reads as the default."""
        mode = self.settings.get("profanity")
        return mode if mode in PROFANITY_MODES else PROFANITY_DEFAULT

    def set_profanity(self, mode: str) -> None:
        if mode not in PROFANITY_MODES:
            raise ValueError(f"unknown profanity setting {mode!r}")
        changed = mode != self.profanity()
        self.settings.set("profanity", mode)
        self.profanity_actions[mode].setChecked(True)
        if changed:
            self.set_status(f"Profanity: {mode}" + (" (from the next session)" if self.controller.busy else ""))

    def final_mt(self) -> str:
        """Session → Final translation; a stored value unknown or no longer installed reads as auto."""
        choice = self.settings.get("final_mt")
        return choice if choice in FINAL_MT_LABELS and final_mt_installed(choice) else "auto"

    def set_final_mt(self, choice: str) -> None:
        if choice not in FINAL_MT_LABELS:
            raise ValueError(f"unknown final translation {choice!r}")
        if not final_mt_installed(choice):  # removed since the menu was shown
            self.set_status(f"{choice} is not installed: relay models install {choice}")
            self.refresh_final_mt()
            return
        changed = choice != self.final_mt()
        self.settings.set("final_mt", choice)
        self.final_mt_actions[choice].setChecked(True)
        if changed:
            self.set_status(f"Final translation: {choice}" + (" (from the next session)" if self.controller.busy else ""))

    def refresh_final_mt(self) -> None:
        """An LLM pack not installed is shown disabled, with the command that adds it."""
        for choice, a in self.final_mt_actions.items():
            ok = final_mt_installed(choice)
            a.setEnabled(ok)
            a.setToolTip("What translates the finals, the text that stays (from the next session)" if ok else
                         f"Not installed: relay models install {choice} (optional)")
        self.final_mt_actions[self.final_mt()].setChecked(True)

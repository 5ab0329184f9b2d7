"""Capture sources and playback sinks, in plain words.

* Linux with PulseAudio/PipeWire: every source and sink of the sound server (``pactl``); the
  monitor of each output (``<sink>.monitor``) is "system audio". Streams are opened on the ALSA
  ``pulse`` device with ``PULSE_SOURCE``/``PULSE_SINK`` naming the server's device.
* Windows: WASAPI loopback of each output through the optional PyAudioWPatch package
  (sounddevice has no high-level loopback API); microphones and outputs through sounddevice.
* macOS: a virtual loopback device such as BlackHole shows up as an input; the list says so
  when none is installed.
* Anything else: PortAudio's own device list.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field

from app.core.errors import UserError

log = logging.getLogger("relay.audio")

PULSE_ALSA_DEVICE = "pulse"


@dataclass(frozen=True)
class AudioDevice:
    id: str  # what --source / --dub-device accept
    label: str  # plain words for lists and menus
    kind: str  # "microphone" | "system" | "output"
    backend: str = "pulse"  # "pulse" | "portaudio" | "wasapi-loopback"
    portaudio_name: str | None = None  # the device sounddevice opens
    default: bool = False


@dataclass
class DeviceList:
    sources: list[AudioDevice] = field(default_factory=list)
    sinks: list[AudioDevice] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    server: str | None = None  # "PulseAudio 16.1", "PipeWire …", "PortAudio"


def _pactl(*args: str, timeout: float = 3.0) -> str | None:
    exe = shutil.which("pactl")
    if exe is None:
        return None
    try:
        r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None


def pulse_server() -> str | None:
    """The sound server's name and version when a PulseAudio-compatible server answers."""
    info = _pactl("info")
    if info is None:
        return None
    name = version = ""
    for line in info.splitlines():
        if line.startswith("Server Name:"):
            name = line.split(":", 1)[1].strip()
        elif line.startswith("Server Version:"):
            version = line.split(":", 1)[1].strip()
    return f"{name} {version}".strip() or "PulseAudio"


def _pulse_list(kind: str) -> list[dict]:
    out = _pactl("-f", "json", "list", kind)
    if out:
        try:
            return json.loads(out)
        except ValueError:
            pass
    short = _pactl("list", "short", kind) or ""  # older servers: no JSON, no descriptions
    rows = []
    for line in short.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2:
            rows.append({"name": parts[1], "description": parts[1]})
    return rows


def _pulse_devices(dl: DeviceList) -> None:
    info = _pactl("info") or ""
    default_src = default_sink = None
    for line in info.splitlines():
        if line.startswith("Default Source:"):
            default_src = line.split(":", 1)[1].strip()
        elif line.startswith("Default Sink:"):
            default_sink = line.split(":", 1)[1].strip()
    for s in _pulse_list("sources"):
        name = s.get("name", "")
        desc = s.get("description") or name
        monitor_of = s.get("monitor_of_sink") or s.get("monitor_source")
        is_monitor = name.endswith(".monitor") or (monitor_of not in (None, "", "n/a"))
        if is_monitor:
            desc = desc.removeprefix("Monitor of ").strip()
            label = f"System audio: {desc} (what plays on it)"
        else:
            label = f"Microphone: {desc}"
        dl.sources.append(AudioDevice(name, label, "system" if is_monitor else "microphone", "pulse",
                                      PULSE_ALSA_DEVICE, name == default_src))
    for s in _pulse_list("sinks"):
        name = s.get("name", "")
        dl.sinks.append(AudioDevice(name, f"Output: {s.get('description') or name}", "output", "pulse",
                                    PULSE_ALSA_DEVICE, name == default_sink))


def _portaudio_devices(dl: DeviceList) -> None:
    try:
        import sounddevice as sd  # PortAudio loads only when a device is used: files need none

        devs = sd.query_devices()
        apis = sd.query_hostapis()
    except Exception as e:  # no PortAudio library, or it failed to start
        dl.notes.append(f"PortAudio is not available ({str(e).splitlines()[0]})")
        return
    for d in devs:
        api = apis[d["hostapi"]]["name"]
        name = d["name"]
        if d["max_input_channels"] > 0:
            loop = any(k in name.lower() for k in ("blackhole", "loopback", "soundflower", "stereo mix"))
            dl.sources.append(AudioDevice(name, (f"System audio: {name}" if loop else f"Microphone: {name}")
                                          + f" ({api})", "system" if loop else "microphone", "portaudio", name))
        if d["max_output_channels"] > 0:
            dl.sinks.append(AudioDevice(name, f"Output: {name} ({api})", "output", "portaudio", name))


def _wasapi_loopback(dl: DeviceList) -> None:
    try:
        import pyaudiowpatch as pyaudio  # optional, Windows only
    except ImportError:
        dl.notes.append("system audio on Windows needs the optional package PyAudioWPatch "
                        "(pip install PyAudioWPatch); microphones work without it")
        return
    pa = pyaudio.PyAudio()
    try:
        for d in pa.get_loopback_device_info_generator():
            dl.sources.append(AudioDevice(d["name"], f"System audio: {d['name']}", "system", "wasapi-loopback",
                                          d["name"]))
    finally:
        pa.terminate()


def list_devices() -> DeviceList:
    dl = DeviceList()
    server = pulse_server() if sys.platform.startswith("linux") else None
    if server is not None:
        dl.server = server
        _pulse_devices(dl)
        return dl
    dl.server = "PortAudio"
    if sys.platform.startswith("linux"):
        dl.notes.append("no PulseAudio/PipeWire server answered: system audio needs one "
                        "(capture the monitor of the meeting's output); showing ALSA devices")
    _portaudio_devices(dl)
    if sys.platform == "win32":
        _wasapi_loopback(dl)
    if sys.platform == "darwin" and not any(d.kind == "system" for d in dl.sources):
        dl.notes.append("no system-audio device found: install a virtual loopback device such as "
                        "BlackHole and send the meeting's output to it")
    return dl


def _find(devs: list[AudioDevice], name: str) -> AudioDevice | None:
    for d in devs:
        if name == d.id:
            return d
    low = name.lower()
    hits = [d for d in devs if low == d.label.lower() or low in d.label.lower()]
    return hits[0] if len(hits) == 1 else None


def resolve(name: str, output: bool = False, devices: DeviceList | None = None) -> AudioDevice:
    """The device a user named (id, label, or an unambiguous part of the label); else one line."""
    dl = devices or list_devices()
    devs = dl.sinks if output else dl.sources
    if name == "default":
        d = next((d for d in devs if d.default), devs[0] if devs else None)
        if d is not None:
            return d
    d = _find(devs, name)
    if d is None:
        what = "playback sink" if output else "capture source"
        have = ", ".join(x.id for x in devs) or "none"
        raise UserError(f"no {what} named '{name}' (available: {have}); see: relay devices")
    return d


def cmd_devices(args) -> int:
    dl = list_devices()
    if getattr(args, "json", False):
        print(json.dumps({"server": dl.server, "notes": dl.notes,
                          "sources": [d.__dict__ for d in dl.sources],
                          "sinks": [d.__dict__ for d in dl.sinks]}, ensure_ascii=False))
        return 0
    print(f"sound server: {dl.server}")
    print("capture sources (relay run --source ID):")
    for d in dl.sources or []:
        print(f"  {d.id:<32} {d.label}{'  [default]' if d.default else ''}")
    if not dl.sources:
        print("  (none)")
    print("playback sinks (relay run --dub-device ID):")
    for d in dl.sinks:
        print(f"  {d.id:<32} {d.label}{'  [default]' if d.default else ''}")
    if not dl.sinks:
        print("  (none)")
    for n in dl.notes:
        print(f"note: {n}")
    return 0


_alsa_handler = None


def quiet_alsa() -> None:
    """Route libasound's own error prints ("underrun occurred", failed opens) away from the
    user's terminal; Relay counts and reports those conditions itself."""
    global _alsa_handler
    if _alsa_handler is not None or not sys.platform.startswith("linux"):
        return
    name = ctypes.util.find_library("asound")
    if not name:
        return
    try:
        lib = ctypes.CDLL(name)
        proto = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p)
        _alsa_handler = proto(lambda *a: None)
        lib.snd_lib_error_set_handler(_alsa_handler)
    except (OSError, AttributeError):
        pass


def open_env(dev: AudioDevice, output: bool) -> dict:
    """Environment a PortAudio stream on the ALSA ``pulse`` device reads when it opens."""
    if dev.backend != "pulse":
        return {}
    return {"PULSE_SINK" if output else "PULSE_SOURCE": dev.id}


def pulse_route(dev: AudioDevice, output: bool) -> str | None:
    """After a stream on the ALSA ``pulse`` device started (inside ``env_set``): make sure it is
    on ``dev`` and move it there if not. A client that connects while a restarted server is
    still loading its devices, or whose open missed PULSE_SOURCE/PULSE_SINK, lands on the
    default device: for the capture that is often the microphone, so Relay would interpret the
    wrong sound (or play the dub into the meeting). Returns None when the streams are where they
    should be (or this is not a PulseAudio-compatible server), else why they could not be put
    there; the caller then treats the open as failed and retries."""
    if dev.backend != "pulse" or shutil.which("pactl") is None:
        return None
    kind, field_, move = (("sinks", "sink", "move-sink-input") if output
                          else ("sources", "source", "move-source-output"))
    devices = _pactl("-f", "json", "list", "short", kind)
    streams = _pactl("-f", "json", "list", "sink-inputs" if output else "source-outputs")
    if devices is None or streams is None:
        return None  # an older pactl without JSON: nothing to check with
    try:
        index = {d["name"]: d["index"] for d in json.loads(devices)}
        ours = [x for x in json.loads(streams)
                if str(x.get("properties", {}).get("application.process.id")) == str(os.getpid())]
    except (ValueError, KeyError, TypeError):
        return None
    if dev.id not in index:
        return f"the sound server has no {dev.id!r} yet"
    if not ours:
        return None  # not connected through PulseAudio (a plain ALSA device): nothing to check
    x = max(ours, key=lambda x: x["index"])  # the stream just opened (opens take _OPEN_LOCK)
    if x.get(field_) != index[dev.id]:
        names = {i: n for n, i in index.items()}
        if _pactl(move, str(x["index"]), dev.id) is None:
            return f"the stream opened on {names.get(x.get(field_), '?')!r} and could not be moved"
        log.warning("%s stream opened on %r instead of %r; moved it", "playback" if output else "capture",
                    names.get(x.get(field_), "?"), dev.id)
    return None


_OPEN_LOCK = threading.RLock()


def env_set(env: dict):
    """Context manager: set variables for the duration of a stream's open call, one open at a
    time in the process. The capture and the dub retry a lost device on the same one-second
    beat; PortAudio reads the environment in C with the GIL released, so a dub open restoring
    PULSE_SINK while the capture opened made libpulse miss PULSE_SOURCE and record from the
    default source (a silent microphone) after a sound-server restart. PortAudio's open is not
    thread-safe either."""
    quiet_alsa()

    @contextlib.contextmanager
    def _cm():
        with _OPEN_LOCK:
            old = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                yield
            finally:
                for k, v in old.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v

    return _cm()

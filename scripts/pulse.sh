#!/usr/bin/env bash
# Start a PulseAudio server for the live-audio tests (and for trying Relay on a headless machine):
# null sinks "meeting" (what the meeting plays into; Relay captures meeting.monitor) and "dub"
# (where Relay plays the dub, so it never comes back in through the capture), and a null source
# "desk_mic" standing in for a microphone. Idempotent; installs the Debian packages when missing.
#   scripts/pulse.sh          # start (if not running) and print the server's socket
#   scripts/pulse.sh stop
set -euo pipefail
if [ "${1:-}" = "stop" ]; then
  pulseaudio --kill 2>/dev/null || pkill -x pulseaudio 2>/dev/null || true
  exit 0
fi
need=()
command -v pulseaudio >/dev/null || need+=(pulseaudio)
command -v pactl >/dev/null || need+=(pulseaudio-utils)
[ -e /usr/share/alsa/alsa.conf.d/pulse.conf ] || [ -e /etc/alsa/conf.d/99-pulse.conf ] || need+=(libasound2-plugins)
ldconfig -p | grep -q libportaudio.so.2 || need+=(libportaudio2)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if ! pactl info >/dev/null 2>&1; then
  # the socket last: no client connects before every device exists (one that did landed on
  # the default source, not the one it asked for)
  args=(-n --daemonize=yes --exit-idle-time=-1 --log-target=stderr
        "--load=module-null-sink sink_name=meeting sink_properties=device.description=Meeting"
        "--load=module-null-sink sink_name=dub sink_properties=device.description=Dub"
        "--load=module-null-source source_name=desk_mic"
        --load=module-native-protocol-unix)
  [ "$(id -u)" = 0 ] && args+=(--system=no)
  pulseaudio "${args[@]}" 2>/tmp/relay-pulse.log || { echo "pulse.sh: pulseaudio did not start:"; tail -5 /tmp/relay-pulse.log; exit 1; }
  for _ in $(seq 50); do pactl info >/dev/null 2>&1 && break; sleep 0.1; done
fi
pactl list short sources | grep -q desk_mic ||
  pactl load-module module-null-source source_name=desk_mic >/dev/null  # (this module rejects source_properties)
pactl info | grep -E "^Server String" || true

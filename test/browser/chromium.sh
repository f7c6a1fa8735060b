#!/usr/bin/env bash
# The chromium the browser tests launch: Debian's (SVC_CHROMIUM, default
# /usr/bin/chromium) with Playwright's arguments, and two more features off.
# Every window of a headless chromium preloads its address bar's popups,
# two WebUI pages in renderers of their own, which no test opens: the
# fourteen browser files ran about 116 page renderers beside 40 such ones.
# Features are one switch whose last value wins, so they are added to
# Playwright's list instead of passed as an argument of their own.
off="WebUIOmniboxPopup,WebUIOmniboxAimPopup"
args=()
added=""
for arg in "$@"; do
  case "$arg" in
    --disable-features=*) arg="$arg,$off"; added=1 ;;
  esac
  args+=("$arg")
done
[ -n "$added" ] || args+=("--disable-features=$off")
exec "${SVC_CHROMIUM:-/usr/bin/chromium}" "${args[@]}"

#!/bin/sh
# Debian's postgresql and chromium for the history tests: the tests start a PostgreSQL server of
# their own on a loopback port (initdb into a temporary folder, as the postgres user when run as
# root) and open the trend site in headless Chromium.
#
# Idempotent: installs only what is missing. Always exits 0: when a package can't be had it says
# so, and the postgres / browser tests skip with that reason instead of failing.
START=$(date +%s)
say() { echo "history-setup [$(( $(date +%s) - START )) s]: $*"; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo -n "$@"; else return 1; fi
}

have_postgres() { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; }
have_chromium() { command -v chromium >/dev/null 2>&1; }

missing=""
have_postgres || missing="$missing postgresql"
have_chromium || missing="$missing chromium"
if [ -n "$missing" ]; then
    say "installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -qq >/dev/null 2>&1
    # shellcheck disable=SC2086
    as_root apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1 \
        || say "apt-get install$missing failed"
fi
have_postgres && say "postgresql: $(ls -d /usr/lib/postgresql/*/bin | head -1)" \
    || say "postgresql unavailable: the postgres tests will skip"
have_chromium && say "chromium: $(chromium --version 2>/dev/null | head -1)" \
    || say "chromium unavailable: the browser tests will skip"
exit 0

#!/bin/sh
# Make a Docker engine and a local base image available for the docker tests.
#
# Idempotent: installs nothing that is already there, starts dockerd only when no engine answers,
# imports the base image only when it is missing. Always exits 0: when Docker can't be had it says
# why, and the docker tests skip with that reason instead of failing.
#
# Environment:
#   DOCKER_TEST_BASE   name of the local base image (default dl-bench-base:bookworm)
#   DOCKERD_LOG        where dockerd logs go (default /tmp/dockerd.log)
BASE="${DOCKER_TEST_BASE:-dl-bench-base:bookworm}"
LOG="${DOCKERD_LOG:-/tmp/dockerd.log}"

START=$(date +%s)
say() { echo "docker-setup [$(( $(date +%s) - START )) s]: $*"; }
give_up() { say "Docker unavailable: $*"; exit 0; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo -n "$@"; else return 1; fi
}

engine_up() { docker info >/dev/null 2>&1; }

# tini provides docker-init, which containers started with init=True need.
if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null \
        || ! command -v docker-init >/dev/null; then
    say "installing docker.io tini debootstrap docker-compose"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -qq >/dev/null 2>&1
    as_root apt-get install -y -qq --no-install-recommends docker.io tini debootstrap docker-compose \
        >/dev/null 2>&1 \
        || give_up "apt-get install docker.io debootstrap failed (no root or no network)"
fi

# A registry v2 server (Debian's docker-registry) for the registry tests, started by the tests
# themselves on a loopback port; the package's own service is never started.
if ! command -v docker-registry >/dev/null; then
    say "installing docker-registry"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get install -y -qq --no-install-recommends docker-registry >/dev/null 2>&1 \
        || { as_root apt-get update -qq >/dev/null 2>&1; \
             as_root apt-get install -y -qq --no-install-recommends docker-registry >/dev/null 2>&1; } \
        || say "docker-registry not installed: the registry tests will skip"
fi

# start_dockerd DRIVER: start dockerd on that storage driver and wait for it; fails when it
# exits (a driver the kernel or the file system can't give: "error initializing graphdriver")
# or does not answer within 60 s.
start_dockerd() {
    say "starting dockerd, storage driver $1 (log: $LOG)"
    as_root sh -c "nohup dockerd --storage-driver=$1 --iptables=false --bridge=none >'$LOG' 2>&1 &" \
        || return 1
    i=0
    while ! engine_up; do
        i=$((i + 1))
        pgrep -x dockerd >/dev/null || { say "dockerd ($1) exited: $(tail -n 1 "$LOG" 2>/dev/null)"; return 1; }
        [ "$i" -gt 60 ] && { say "dockerd ($1) did not answer within 60 s: $(tail -n 3 "$LOG" 2>/dev/null)"; \
                             as_root pkill -x dockerd; sleep 2; return 1; }
        sleep 1
    done
}

if ! engine_up; then
    # No iptables/bridge: works without netfilter; containers then only get network_mode none or
    # host, which is all the runner uses. overlay2 where the kernel has overlayfs: a container
    # shares its image's layers instead of copying them. On vfs, the fallback (no overlayfs, as
    # in some unprivileged CI containers), each container starts with full copies of its image:
    # 6.7 s against 0.8 s for one `docker run` of the base image on a quiet 2-core VM
    # (2026-11-29), 20 s and more beside the tests' framework processes.
    { grep -qw overlay /proc/filesystems && start_dockerd overlay2; } || start_dockerd vfs \
        || give_up "could not start dockerd; last log lines: $(tail -n 3 "$LOG" 2>/dev/null)"
fi
say "engine up: $(docker version --format '{{.Server.Version}}' 2>/dev/null)"

if docker image inspect "$BASE" >/dev/null 2>&1; then
    say "base image $BASE present"
    exit 0
fi

# No registry here: build the base from Debian packages. python3 is 3.11 on bookworm, like the
# digest-pinned python:3.11 base the Dockerfiles use by default.
ROOTFS="$(mktemp -d /tmp/dl-bench-rootfs.XXXXXX)"
say "debootstrap bookworm into $ROOTFS (about a minute)"
as_root debootstrap --variant=minbase --include=python3,python3-numpy,python3-venv bookworm "$ROOTFS" \
    http://deb.debian.org/debian >/tmp/debootstrap.log 2>&1 \
    || { as_root rm -rf "$ROOTFS"; give_up "debootstrap failed; see /tmp/debootstrap.log"; }
# mktemp made the root folder 0700: the image's / must be 0755, or no non-root user can run.
as_root chmod 0755 "$ROOTFS"
# What no test reads (the downloaded .debs, apt's lists, docs, man pages, translations: 150 of
# 327 MB): on a vfs engine every container starts with two full copies of its image, so a
# smaller base makes every docker test's containers start sooner.
as_root sh -c "rm -rf '$ROOTFS'/var/cache/apt/* '$ROOTFS'/var/lib/apt/lists/* \
    '$ROOTFS'/usr/share/doc/* '$ROOTFS'/usr/share/man/* '$ROOTFS'/usr/share/locale/* \
    '$ROOTFS'/usr/share/info/*"
as_root tar -C "$ROOTFS" -c . | docker import - "$BASE" >/dev/null \
    || { as_root rm -rf "$ROOTFS"; give_up "docker import of the base image failed"; }
as_root rm -rf "$ROOTFS"
say "base image $BASE imported"
exit 0

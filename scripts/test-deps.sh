#!/bin/sh
# test-deps.sh: the Debian packages the tests need, in one place. `make test`
# (through `make test-deps`) and .ci/run call it before any test.
#
# It checks each package by what the tests use from it (a command, a Python
# module of Debian's /usr/bin/python3, which must be a real module with a file,
# not an empty namespace package left by a partial install), not by dpkg's
# records. When something is missing: as root, it installs it (apt-get update
# once, then apt-get install); otherwise it prints the exact apt-get line and
# exits 1, so that no test runs without it. With nothing missing it prints one line and does
# nothing else.
#
#   scripts/test-deps.sh           check, and install as root
#   scripts/test-deps.sh -n        check only: list what is missing, exit 1 if anything is
#   scripts/test-deps.sh -list     print the package list
set -eu

PYTHON=${PYTHON:-/usr/bin/python3}
PATH=$PATH:/usr/sbin:/sbin # ip, tc and nft live there

# package|probe (a shell command that succeeds when the package is usable)|why
# Root-only packages (root| prefix) matter only to tests that run as root:
# without root those tests skip themselves, so a missing one does not stop a
# user's run.
PACKAGES='
make|command -v make|the README'"'"'s test command is `make test`
gcc|command -v gcc|-race needs cgo
python3|test -x '"$PYTHON"'|the Python client'"'"'s tests run with Debian'"'"'s interpreter
python3-grpcio|'"$PYTHON"' -c "import grpc as m; assert m.__file__"|the Python client
python3-protobuf|'"$PYTHON"' -c "import google.protobuf as m; assert m.__file__"|the Python client
python3-pytest|'"$PYTHON"' -c "import pytest as m; assert m.__file__"|the Python test runner
python3-numpy|'"$PYTHON"' -c "import numpy as m; assert m.__file__"|the Python client'"'"'s zero-copy buffers
python3-crc32c|'"$PYTHON"' -c "import crc32c as m; assert m.__file__"|the Python client'"'"'s checksums at speed
python3-redis|'"$PYTHON"' -c "import redis as m; assert m.__file__"|the Redis-protocol port'"'"'s tests drive redis-py, as LMCache does
redis-server|command -v redis-server|the Redis baseline'"'"'s backend tests start a real redis-server
redis-tools|command -v redis-cli && command -v redis-benchmark|the Redis-protocol port'"'"'s tests drive redis-cli and redis-benchmark
prometheus|command -v promtool|deploy'"'"'s tests check the alert rules with promtool (check rules, test rules)
root|iproute2|command -v ip && command -v tc|the netfault test (root only) makes namespaces, veths and qdiscs
root|nftables|command -v nft|the netfault test (root only) cuts links with nftables rules
'

mode=install
case ${1:-} in
-n) mode=check ;;
-list) mode=list ;;
'') ;;
*) echo "usage: $0 [-n | -list]" >&2; exit 2 ;;
esac

root=false
[ "$(id -u)" -eq 0 ] && root=true

# missing prints the packages whose probe fails, one per line.
missing() {
  echo "$PACKAGES" | while IFS='|' read -r a b c d; do
    [ -n "$a" ] || continue
    if [ "$a" = root ]; then
      $root || continue
      pkg=$b probe=$c
    else
      pkg=$a probe=$b
    fi
    if ! sh -c "$probe" >/dev/null 2>&1; then
      echo "$pkg"
    fi
  done
}

if [ "$mode" = list ]; then
  echo "$PACKAGES" | while IFS='|' read -r a b c d; do
    [ -n "$a" ] || continue
    if [ "$a" = root ]; then echo "$b (as root: $d)"; else echo "$a ($c)"; fi
  done
  exit 0
fi

need=$(missing | tr '\n' ' ' | sed 's/ *$//')
if [ -z "$need" ]; then
  echo "== test deps: all present"
  exit 0
fi
line="apt-get install -y $need"
echo "== test deps: missing $need"
if [ "$mode" = check ]; then
  exit 1
fi
if ! $root; then
  echo "the tests need these Debian packages; install them as root, then run the tests again:" >&2
  echo "  $line" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "no apt-get here; install the Debian packages $need (or their equivalents) and run the tests again" >&2
  exit 1
fi
echo "+ apt-get update -qq"
DEBIAN_FRONTEND=noninteractive apt-get update -qq
echo "+ $line"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
still=$(missing | tr '\n' ' ' | sed 's/ *$//')
if [ -n "$still" ]; then
  echo "installed, but still not usable: $still (is $PYTHON Debian's interpreter?)" >&2
  exit 1
fi
echo "== test deps: installed $need"

#!/bin/sh
# test-report.sh NAME GO_STATUS PYTHON_STATUS: prints how each half of NAME
# (make test, make test-short) ended and exits non-zero when either failed.
name=$1 go=$2 py=$3
verdict() {
  case $1 in
  0) echo passed ;;
  124) echo "FAILED: timed out (see the Makefile's *_TIMEOUT)" ;;
  *) echo "FAILED (exit $1)" ;;
  esac
}
echo "== $name: Go suite $(verdict "$go"), Python suite $(verdict "$py")"
[ "$go" -eq 0 ] && [ "$py" -eq 0 ]

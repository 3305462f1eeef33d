# shellcheck shell=bash
# Helpers of the shell tests: `fail` counts a failure, `expect RC PATTERN CMD...` runs CMD and
# checks its exit code and that its output (stdout and stderr) matches the glob PATTERN, and
# `finish NAME` ends the test (exit 1 after any failure).
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
expect() {
  local want="$1" pattern="$2" got=0 out
  shift 2
  out="$("$@" 2>&1)" || got=$?
  # shellcheck disable=SC2053  # (PATTERN is a glob on purpose)
  if ((got != want)) || [[ "$out" != $pattern ]]; then
    fail "$* : exit $got (expected $want), output:"$'\n'"$(tail -5 <<<"$out")"
  fi
}
finish() {
  if ((failures)); then
    echo "$1: $failures failure(s)" >&2
    exit 1
  fi
  echo "$1: passed"
}

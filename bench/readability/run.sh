#!/bin/sh
# Compares Mozilla Readability with Quarry's extractor on the readability
# fixtures: runs compare.mjs, then quarry_bench_extract --score-dir. Builds nothing.
#
# Usage: bench/readability/run.sh BENCH_BINARY [--rounds N] [--out DIR] [--dir FIXTURES]
#   BENCH_BINARY  path to a built quarry_bench_extract (Release for speed figures)
#   --rounds N    timed rounds for both extractors (default 3); medians are reported
#   --out DIR     where Readability's HTML goes (default bench/readability/out)
#   --dir DIR     the fixture folder (default: the bench binary's and script's own)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ]; then
  sed -n '5,9s/^# \{0,1\}//p' "$0" >&2
  exit 2
fi
bench=$1
shift
rounds=3
out=$here/out
dir=
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
done
if [ ! -x "$bench" ]; then
  echo "not an executable: $bench (build the quarry_bench_extract target first)" >&2
  exit 2
fi
if [ ! -d "$here/node_modules/@mozilla/readability" ] || [ ! -d "$here/node_modules/jsdom" ]; then
  echo "missing node modules: run 'npm ci' in $here first" >&2
  exit 2
fi

set -- --rounds "$rounds"
[ -n "$dir" ] && set -- "$@" --dir "$dir"
node "$here/compare.mjs" --out "$out" "$@"
echo
"$bench" --score-dir "$out" --score-label readability "$@"

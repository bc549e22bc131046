#!/usr/bin/env bash
# The two installs a fresh machine makes, each in a fresh clone, with no pip cache (PIP_NO_CACHE_DIR=1:
# a user's first install has none): the core (`make install-core`, what `make demo` installs: torch
# 2.13.0 CPU + `pip install -e .`) and the full one (`make install`, what `make test`, `make lint` and
# `make docs` install: the core + the dev, pettingzoo, ray, trackers and palaestrai extras). Then the
# demo itself in the core venv (`make demo` once its stamp is there: the run alone), which fails if
# anything on its path needs an extra. Prints a table: wall time, peak memory, venv size, packages.
#
#   bench/speed/install_size.sh                 # clones this repository's HEAD (commit first) into /tmp
#   SRC=/path/to/repo WORK=/scratch bench/speed/install_size.sh
#   KEEP=1 bench/speed/install_size.sh          # leaves the clones (and their venvs) in place
#
# The clones are removed at the end unless KEEP=1. Runs one install at a time: on a shared 2-core
# machine the load average (printed) moves the times by tens of seconds.
set -euo pipefail
SRC=${SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
WORK=${WORK:-/tmp}
export PIP_NO_CACHE_DIR=1

clones=()
cleanup() { [ -n "${KEEP:-}" ] || for c in "${clones[@]}"; do rm -rf "$c"; done; }
trap cleanup EXIT

secs() {  # "Elapsed (wall clock) time" of /usr/bin/time -v: [h:]m:ss.ss -> seconds
	awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; printf "%.0f", s}' "$1"
}
mmss() { printf "%dm%02ds" $(($1 / 60)) $(($1 % 60)); }
peak() { awk -F': ' '/Maximum resident set size/ {printf "%.0f MB", $2 / 1024}' "$1"; }

rows=()
declare -A took
measure() {  # name, clone, make target
	local name=$1 dir=$2 target=$3 log
	log=$dir/.time-$target.txt
	echo "== $name: make $target in $dir (load average: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
	(cd "$dir" && /usr/bin/time -v -o "$log" make "$target" > "$dir/.make-$target.log" 2>&1) \
		|| { echo "make $target failed; the end of its output:" >&2; tail -30 "$dir/.make-$target.log" >&2; exit 1; }
	local s size pkgs
	s=$(secs "$log")
	took[$target]=$s
	size=$(du -sh "$dir/.venv" | cut -f1)
	pkgs=$("$dir/.venv/bin/pip" list --format=freeze 2>/dev/null | wc -l)
	rows+=("$(printf '| %-32s | %8s | %10s | %8s | %8s |' "$name" "$(mmss "$s")" "$(peak "$log")" "$size" "$pkgs")")
}

for kind in core full; do
	dir=$(mktemp -d "$WORK/arl-install-$kind.XXXX")
	clones+=("$dir")
	git clone -q "$SRC" "$dir"
	if [ $kind = core ]; then
		measure "core (make install-core)" "$dir" install-core
		measure "demo run on the core (make demo)" "$dir" demo
		rows+=("$(printf '| %-32s | %8s | %10s | %8s | %8s |' "make demo, fresh clone (the sum)" "$(mmss $((took[install-core] + took[demo])))" "" "" "")")
		"$dir/.venv/bin/pip" list --format=freeze > "$WORK/arl-install-core.freeze.txt"
	else
		measure "full (make install)" "$dir" install
		"$dir/.venv/bin/pip" list --format=freeze > "$WORK/arl-install-full.freeze.txt"
	fi
	echo "-- the largest packages in the $kind venv:" >&2
	du -sm "$dir"/.venv/lib/python*/site-packages/* | sort -rn | head -8 >&2
done

echo
echo "$(date -u +%F) $(git -C "$SRC" rev-parse --short HEAD), PIP_NO_CACHE_DIR=1, $(nproc) cores"
printf '| %-32s | %8s | %10s | %8s | %8s |\n' "what" "wall" "peak RSS" "venv" "packages"
printf '|%s|%s|%s|%s|%s|\n' "----------------------------------" "----------" "------------" "----------" "----------"
printf '%s\n' "${rows[@]}"
echo "(pip freeze of each venv: $WORK/arl-install-core.freeze.txt, $WORK/arl-install-full.freeze.txt)"

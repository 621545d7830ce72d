#!/usr/bin/env bash
# Fault-injection suite for setrows-bisect: bad inputs, SIGKILL at random moments, a full disk,
# a hostile probe hunting for the GitHub token, and GitHub error responses from a local
# stand-in API. Prints HELD/FAILED per case, then a tally; exits 0 only when every case held.
#
#   bash scripts/fault-injection.sh [--quick]
#
# --quick runs a subset (fewer kills, a smaller history, fewer GitHub statuses): < 2 minutes.
# Environment: SETROWS_BISECT_BIN (default target/release/setrows-bisect), FI_SEED (random
# kill delays; printed so a run can be repeated), FI_KEEP=1 (keep the temp dir for a look).
# Needs bash, git, python3, coreutils, procps (pgrep); root for the tmpfs part of case 3.
# See docs/reliability.md.
set -u
set -o pipefail

QUICK=0
for a in "$@"; do
    case "$a" in
        --quick) QUICK=1 ;;
        -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "fault-injection: unknown argument $a (usage: bash scripts/fault-injection.sh [--quick])" >&2; exit 2 ;;
    esac
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HERE=$ROOT/scripts/fault-injection
BIN=${SETROWS_BISECT_BIN:-$ROOT/target/release/setrows-bisect}
if [ ! -x "$BIN" ]; then
    echo "fault-injection: no binary at $BIN (run: cargo build --release, or set SETROWS_BISECT_BIN)" >&2
    exit 2
fi
for t in git python3 pgrep timeout od; do
    command -v "$t" >/dev/null || { echo "fault-injection: $t is required" >&2; exit 2; }
done

# Nothing from the caller's environment may steer the tool: work dir, tokens, API, Actions.
unset SETROWS_WORK_DIR GITHUB_TOKEN GH_TOKEN GITHUB_PAT GH_ENTERPRISE_TOKEN GITHUB_ENTERPRISE_TOKEN \
    RESULTS_TOKEN GITHUB_API_URL GITHUB_ACTIONS GITHUB_STEP_SUMMARY GITHUB_SERVER_URL \
    GITHUB_REPOSITORY GITHUB_RUN_ID SETROWS_CRED_FD SETROWS_MIN_FREE_MB
export LC_ALL=C

SEED=${FI_SEED:-$(( $(date +%s) % 100000 ))}
RANDOM=$SEED
TMP=$(mktemp -d "${TMPDIR:-/tmp}/setrows-fi.XXXXXX")
# Test one binary throughout, even if someone rebuilds target/ while the suite runs.
BIN_SRC=$BIN
cp "$BIN_SRC" "$TMP/setrows-bisect" && BIN=$TMP/setrows-bisect
# One marker per suite run: every build/test process carries it in its argv (pgrep -f).
MARKER="fi-marker-$$-$SEED"
START_TS=$(date +%s)

TRIED=0
HELD=0
FAILED_LINES=()
SERVER_PIDS=()
BG_PIDS=()
MOUNTED=()

held() {
    TRIED=$((TRIED + 1)); HELD=$((HELD + 1))
    printf 'HELD   %s\n' "$1"
}
failed() {
    TRIED=$((TRIED + 1))
    FAILED_LINES+=("$1: $2")
    printf 'FAILED %s: %s\n' "$1" "$2"
}
note() { printf '       %s\n' "$*"; }
section() { printf '\n== %s\n' "$*"; }

cleanup() {
    local p m
    for p in "${BG_PIDS[@]}" "${SERVER_PIDS[@]}"; do
        kill -9 "$p" 2>/dev/null
    done
    for m in "${MOUNTED[@]}"; do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
    done
    if [ "${FI_KEEP:-0}" = 1 ]; then
        echo "kept $TMP"
    else
        rm -rf "$TMP"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

json_get() { # FILE EXPR(python, on v)
    python3 - "$1" "$2" <<'PY' 2>/dev/null
import json, sys
try:
    v = json.load(open(sys.argv[1]))
    r = eval(sys.argv[2], {"v": v})
    print("null" if r is None else r)
except Exception as e:
    print("<unreadable: %s>" % e)
PY
}

# Stored probe runs in a work dir (results/<key>/run-NNNN.json).
count_runs() { find "$1/results" -name 'run-*.json' 2>/dev/null | wc -l; }

# ----------------------------------------------------------------------------------------------
# A small history: commit i writes counter=i; test.sh fails from commit BUG_AT on. build.sh and
# test.sh sleep in a child whose argv carries the marker (so survivors are visible to pgrep).
make_repo() { # DIR COMMITS BUG_AT
    local dir=$1 n=$2 k=$3 i
    mkdir -p "$dir"
    git -C "$dir" init -q -b main 2>/dev/null || git -C "$dir" init -q
    cat >"$dir/build.sh" <<'EOF'
#!/bin/sh
# build.sh MARKER SECS: "compile" (sleep with the marker in argv), write the artefact to $WORK.
sh -c 'sleep "$1"; :' "$1-build" "${2:-0}"
cp "$SRC/counter" "$WORK/artefact" || exit 1
EOF
    cat >"$dir/test.sh" <<EOF
#!/bin/sh
# test.sh MARKER SECS: old behaviour (exit 0) before commit $k, new (exit 1) from it on.
sh -c 'sleep "\$1"; :' "\$1-test" "\${2:-0}"
c=\$(cat "\$SRC/counter") || exit 125
[ "\$c" -lt $k ]
EOF
    (
        cd "$dir" || exit 1
        export GIT_AUTHOR_NAME=fi GIT_AUTHOR_EMAIL=fi@example.invalid \
            GIT_COMMITTER_NAME=fi GIT_COMMITTER_EMAIL=fi@example.invalid
        for ((i = 0; i < n; i++)); do
            echo "$i" >counter
            export GIT_AUTHOR_DATE="2024-01-01T00:00:00Z" GIT_COMMITTER_DATE="2024-01-01T00:00:00Z"
            git add -A && git commit -q -m "commit $i" || exit 1
            git tag "c$i"
        done
    ) || return 1
}

sha_of() { git -C "$1" rev-parse "$2^{commit}"; }

# ----------------------------------------------------------------------------------------------
if [ "$QUICK" = 1 ]; then
    COMMITS=80; BUG_AT=53; KILLS=3; STEP_SECS=0.25
else
    COMMITS=150; BUG_AT=97; KILLS=6; STEP_SECS=0.35
fi
REPO=$TMP/repo
echo "setrows-fault-injection: $( [ "$QUICK" = 1 ] && echo quick || echo full ) suite, seed $SEED, $(date -u +%FT%TZ)"
echo "  $("$BIN" --version 2>/dev/null) (copy of $BIN_SRC, built $(date -u -r "$BIN_SRC" +%FT%TZ); tree $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "  $(uname -srm), $(nproc) cpu(s), uid $(id -u), temp $TMP"
if ! make_repo "$REPO" "$COMMITS" "$BUG_AT" >/dev/null 2>&1; then
    echo "fault-injection: could not generate the test repository" >&2
    exit 2
fi
GOOD=$(sha_of "$REPO" c0)
BADREV=$(sha_of "$REPO" "c$((COMMITS - 1))")
EXPECT=$(sha_of "$REPO" "c$BUG_AT")
BUILD_CMD="sh \"\$SRC/build.sh\" $MARKER $STEP_SECS"
TEST_CMD="sh \"\$SRC/test.sh\" $MARKER $STEP_SECS"
echo "  history: $COMMITS commits, behaviour changes at commit $BUG_AT ($EXPECT)"

# Free space floor: the tool refuses steps with < 1024 MiB free by default. Only a nearly full
# machine gets a lower floor, so the other cases test what they claim (case 3 sets its own).
FREE_MB=$(( $(df -Pk "$TMP" | awk 'NR==2{print $4}') / 1024 ))
if [ "$FREE_MB" -lt 1300 ]; then
    export SETROWS_MIN_FREE_MB=64
    echo "  note: only $FREE_MB MiB free in $TMP; SETROWS_MIN_FREE_MB=64 for cases other than 3"
fi

# ==============================================================================================
# Case 1: bad inputs. Exit 2, exactly one stderr line "setrows-bisect: error: ...", nothing run:
# no probe (the script touches a sentinel), no stored results, no --json written.
SENT=$TMP/probe-ran
BADW=$TMP/bad-work
BADJ=$TMP/bad.json
# A short range and no sleeps: when the tool wrongly runs probes first, it costs seconds.
BADS="touch '$SENT'; sh \"\$SRC/test.sh\" $MARKER 0"
BAD_GOOD=$(sha_of "$REPO" "c$((BUG_AT - 6))")
BAD_BAD=$(sha_of "$REPO" "c$((BUG_AT + 5))")
B=(--repo "$REPO" --good "$BAD_GOOD" --bad "$BAD_BAD" --build "touch '$SENT'" --script "$BADS"
    --work-dir "$BADW" --json "$BADJ")
# drop FLAG...: NB = B without those flags and their values
drop() {
    NB=()
    local i=0 f skip
    while [ $i -lt ${#B[@]} ]; do
        skip=0
        for f in "$@"; do [ "${B[$i]}" = "$f" ] && skip=1; done
        if [ $skip = 1 ]; then i=$((i + 2)); else NB+=("${B[$i]}"); i=$((i + 1)); fi
    done
}

bad() { # NAME -- ARGS... (env assignments may come first as VAR=value before --)
    local name=$1; shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    rm -rf "$BADW" "$BADJ" "$SENT"
    local out=$TMP/bad-$name.out err=$TMP/bad-$name.err rc
    timeout -k 5 60 env "${envs[@]}" "$BIN" "$@" >"$out" 2>"$err"
    rc=$?
    local lines first errline reasons=() why=""
    lines=$(wc -l <"$err")
    first=$(head -n1 "$err")
    errline=$(grep -m1 'setrows-bisect: error:' "$err")
    [ "$rc" != 2 ] && reasons+=("exit $rc (expected 2)")
    [ -e "$SENT" ] && reasons+=("probes ran first ($(count_runs "$BADW") run(s) stored)")
    [ ! -e "$SENT" ] && [ "$(count_runs "$BADW")" != 0 ] && reasons+=("results stored in the work dir")
    [ -e "$BADJ" ] && reasons+=("--json was written")
    if [ "$lines" != 1 ]; then
        reasons+=("$lines stderr lines (expected 1)")
    elif [[ "$first" != "setrows-bisect: error:"* ]]; then
        reasons+=("stderr does not start with 'setrows-bisect: error:'")
    fi
    if [ ${#reasons[@]} -gt 0 ]; then
        local shown=${errline:-$first}
        if [ "$lines" -gt 1 ] && [ -n "$errline" ]; then
            # the error line and what follows it (a message broken over lines)
            shown=$(sed -n '/setrows-bisect: error:/,$p' "$err" | head -n 3 | tr '\n' '|')
        fi
        why="$(IFS=';'; echo "${reasons[*]}" | sed 's/;/; /g'); stderr: ${shown:0:240}"
    fi
    if [ -z "$why" ]; then
        held "1 bad-input/$name"
    else
        failed "1 bad-input/$name" "$why"
    fi
}

case1_bad_inputs() {
    section "case 1: bad inputs (exit 2, one error line, nothing run)"
    local m=$TMP/matrix
    mkdir -p "$m" "$TMP/plain-dir"
    printf '[matrix\nrocm = ["6.4.1"\n' >"$m/syntax.toml"
    printf 'bogus_key = 1\n[config]\n' >"$m/unknown.toml"
    cp "$ROOT/matrix.toml" "$m/unknown2.toml" 2>/dev/null && printf '\nnot_a_key_anywhere = "x"\n' >>"$m/unknown2.toml"
    printf 'name = "\xff\xfe bad \xc3\x28"\n' >"$m/nonutf8.toml"
    : >"$TMP/empty.json"
    printf '{"schema": "no-such-schema", ' >"$TMP/trunc.json"
    printf '\xff\xfe\x00{}' >"$TMP/nonutf8.json"
    echo '{"hello": "world"}' >"$TMP/other.json"
    echo notadir >"$TMP/a-file"
    local T40
    T40=$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')
    # A real result file for the report cases: a two-commit bisect (its endpoints only).
    REF_JSON_FOR_BAD=$TMP/two-commit.json
    timeout -k 5 120 "$BIN" --repo "$REPO" --good "$(sha_of "$REPO" "c$((BUG_AT - 1))")" --bad "$EXPECT" \
        --script "$TEST_CMD" --work-dir "$TMP/two-commit-work" --json "$REF_JSON_FOR_BAD" >/dev/null 2>&1

    # revisions and repositories
    drop --good; bad good-unknown-ref -- "${NB[@]}" --good no-such-ref
    drop --bad; bad bad-unknown-ref -- "${NB[@]}" --bad no-such-ref
    drop --good; bad good-empty -- "${NB[@]}" --good ""
    drop --good; bad good-ancestor-overflow -- "${NB[@]}" --good "HEAD~99999"
    drop --good; bad good-equals-bad -- "${NB[@]}" --good "$BAD_BAD"
    drop --good --bad; bad endpoints-swapped -- "${NB[@]}" --good "$BAD_BAD" --bad "$BAD_GOOD"
    drop --good; bad good-non-utf8 -- "${NB[@]}" --good $'c1\xff'
    drop --good; bad good-option-injection -- "${NB[@]}" --good=--output=/tmp/x
    drop --repo; bad repo-missing -- "${NB[@]}" --repo "$TMP/no-such-repo"
    drop --repo; bad repo-not-git -- "${NB[@]}" --repo "$TMP/plain-dir"
    drop --repo; bad repo-is-file -- "${NB[@]}" --repo "$TMP/a-file"
    bad path-missing -- "${B[@]}" --path no/such/dir
    # flags and values
    bad unknown-flag -- "${B[@]}" --frobnicate
    bad timeout-1e20 -- "${B[@]}" --timeout 1e20
    bad timeout-zero -- "${B[@]}" --timeout 0
    bad timeout-negative -- "${B[@]}" --timeout -5
    bad timeout-nan -- "${B[@]}" --timeout NaN
    bad timeout-text -- "${B[@]}" --timeout soon
    bad jobs-zero -- "${B[@]}" --jobs 0
    bad jobs-huge -- "${B[@]}" --jobs 100000
    bad jobs-negative -- "${B[@]}" -j -1
    bad confidence-2 -- "${B[@]}" --confidence 2
    bad confidence-0 -- "${B[@]}" --confidence 0
    bad confidence-with-repeat -- "${B[@]}" --confidence 0.9 --repeat 3
    bad max-runs-without-confidence -- "${B[@]}" --max-runs 5
    bad repeat-zero -- "${B[@]}" --repeat 0
    bad repeat-overflow -- "${B[@]}" --repeat 99999999999999999999
    bad validate-huge -- "${B[@]}" --validate 1000000
    bad regress-unknown -- "${B[@]}" --regress sometimes
    bad match-bad-regex -- "${B[@]}" --match '(unclosed'
    bad engine-without-image -- "${B[@]}" --engine podman
    bad image-without-engine -- "${B[@]}" --image alpine:3
    bad backend-unknown -- "${B[@]}" --backend metal
    bad run-index-without-probe -- "${B[@]}" --run-index 0
    bad probe-unknown-sha -- "${B[@]}" --probe 0123456789abcdef0123456789abcdef01234567 --run-index 0
    bad github-retries-negative GITHUB_TOKEN=0123456789abcdef0123456789abcdef01234567 -- "${B[@]}" --post-to o/r#1 --github-retries -1
    # output paths
    drop --json; bad json-missing-dir -- "${NB[@]}" --json "$TMP/no/such/dir/r.json"
    drop --json; bad json-is-dir -- "${NB[@]}" --json "$TMP/plain-dir"
    drop --json; bad json-unwritable-fs -- "${NB[@]}" --json /proc/setrows-fi.json
    drop --json; bad json-parent-is-file -- "${NB[@]}" --json "$TMP/a-file/r.json"
    bad report-missing-dir -- "${B[@]}" --report "$TMP/no/such/dir/r.md"
    bad report-unwritable-fs -- "${B[@]}" --report /proc/setrows-fi.md
    drop --work-dir; bad work-dir-unwritable -- "${NB[@]}" --work-dir /proc/setrows-fi-work
    drop --work-dir; bad work-dir-is-file -- "${NB[@]}" --work-dir "$TMP/a-file"
    # matrix files
    bad matrix-syntax-error -- "${B[@]}" --config x --matrix "$m/syntax.toml"
    bad matrix-unknown-key -- "${B[@]}" --config x --matrix "$m/unknown.toml"
    [ -f "$m/unknown2.toml" ] && bad matrix-unknown-key-in-real-file -- "${B[@]}" --config x --matrix "$m/unknown2.toml"
    bad matrix-non-utf8 -- "${B[@]}" --config x --matrix "$m/nonutf8.toml"
    bad matrix-missing -- "${B[@]}" --config x --matrix "$m/none.toml"
    bad matrix-list-syntax-error -- matrix --list --matrix "$m/syntax.toml"
    bad matrix-list-non-utf8 -- matrix --list --matrix "$m/nonutf8.toml"
    # --post-to and GitHub connection flags (a token is present, so only the value is wrong)
    local ref
    local i=0
    for ref in 'o/r' 'o/r#' 'o/r#x' 'o#1' '/r#1' 'o/#1' 'o/r#-1' 'o/r#1#2' 'o r/x#1' 'o/r#99999999999999999999' '../../etc#1'; do
        i=$((i + 1))
        bad "post-to-bad-ref-$i" GITHUB_TOKEN="$T40" -- "${B[@]}" --post-to "$ref"
    done
    bad post-to-no-token -- "${B[@]}" --post-to o/r#1
    bad post-to-token-file-missing -- "${B[@]}" --post-to o/r#1 --token-file "$TMP/no-token"
    bad post-to-empty-token GITHUB_TOKEN= -- "${B[@]}" --post-to o/r#1
    local url
    i=0
    for url in 'ftp://127.0.0.1/' 'not a url' '' 'http://' 'javascript:alert(1)' 'file:///etc/passwd'; do
        i=$((i + 1))
        bad "api-url-bad-$i" GITHUB_TOKEN="$T40" -- "${B[@]}" --post-to o/r#1 --api-url "$url"
    done
    # report subcommand: input files and issue refs (no server exists; nothing may be sent)
    bad report-results-missing -- report --results "$TMP/none.json"
    bad report-results-empty -- report --results "$TMP/empty.json"
    bad report-results-truncated -- report --results "$TMP/trunc.json"
    bad report-results-non-utf8 -- report --results "$TMP/nonutf8.json"
    bad report-results-other-schema -- report --results "$TMP/other.json"
    bad report-post-bad-issue GITHUB_TOKEN="$T40" -- report --post --issue 'o/r#x' --results "$TMP/other.json"
    bad report-api-url-ftp GITHUB_TOKEN="$T40" -- report --post --issue o/r#1 --results "$REF_JSON_FOR_BAD" --api-url ftp://127.0.0.1/
    bad report-api-url-garbage GITHUB_TOKEN="$T40" -- report --post --issue o/r#1 --results "$REF_JSON_FOR_BAD" --api-url 'not a url'
    bad report-load-state-bad-key GITHUB_TOKEN="$T40" -- report --issue o/r#1 --load-state '<!--' --api-url http://127.0.0.1:9
}

# ==============================================================================================
# Case 2: SIGKILL at random moments, then the same command again on the same work dir.
kill_args() { # WORK JSON
    KA=(--repo "$REPO" --good "$GOOD" --bad "$BADREV" --build "$BUILD_CMD" --script "$TEST_CMD"
        --timeout 60 --work-dir "$1" --json "$2")
}

survivors() { pgrep -f -- "$MARKER" 2>/dev/null | tr '\n' ' '; }

wait_no_survivors() { # SECS: poll until no marker process is left; prints what is left
    local deadline=$(( $(date +%s%N) / 1000000 + $1 * 1000 )) s
    while :; do
        s=$(survivors)
        [ -z "$s" ] && return 0
        [ $(( $(date +%s%N) / 1000000 )) -ge $deadline ] && { echo "$s"; return 1; }
        sleep 0.1
    done
}

REF_ELAPSED_MS=0
REF_JSON=""
case2_kills() {
    section "case 2: SIGKILL at random moments ($KILLS runs), resume with the same work dir"
    local w=$TMP/kill-ref j=$TMP/kill-ref.json t0 t1 rc fb
    # The survivor check must see a marker process, or it proves nothing.
    sh -c 'sleep 5; :' "$MARKER-selftest" &
    local self=$!
    sleep 0.2
    if [ -z "$(survivors)" ]; then
        kill "$self" 2>/dev/null; wait "$self" 2>/dev/null
        failed "2 kill/survivor-check" "pgrep -f does not see a process carrying the marker (suite cannot check survivors)"
        return
    fi
    kill "$self" 2>/dev/null; wait "$self" 2>/dev/null
    wait_no_survivors 2 >/dev/null
    kill_args "$w" "$j"
    t0=$(date +%s%N)
    timeout -k 5 300 "$BIN" "${KA[@]}" >"$TMP/kill-ref.out" 2>"$TMP/kill-ref.err"
    rc=$?
    t1=$(date +%s%N)
    REF_ELAPSED_MS=$(( (t1 - t0) / 1000000 ))
    fb=$(json_get "$j" 'v["first_bad"]')
    if [ "$rc" != 0 ] || [ "$fb" != "$EXPECT" ]; then
        failed "2 kill/uninterrupted" "exit $rc, first_bad $fb (planted $EXPECT): $(tail -n 3 "$TMP/kill-ref.err" | tr '\n' '|')"
        return
    fi
    REF_JSON=$j
    held "2 kill/uninterrupted (first_bad = planted commit, $(json_get "$j" 'v["executed"]') probes, ${REF_ELAPSED_MS} ms)"
    local max_ms=$(( REF_ELAPSED_MS * 9 / 10 ))
    [ $max_ms -lt 400 ] && max_ms=400
    local k delay_ms pid s why w2 j2 rc2 fb2 stored
    for ((k = 1; k <= KILLS; k++)); do
        delay_ms=$(( 200 + (RANDOM * 32768 + RANDOM) % (max_ms - 200 + 1) ))
        w2=$TMP/kill-$k; j2=$TMP/kill-$k.json
        kill_args "$w2" "$j2"
        why=""
        "$BIN" "${KA[@]}" >"$TMP/kill-$k.killed.out" 2>"$TMP/kill-$k.killed.err" &
        pid=$!
        BG_PIDS+=("$pid")
        sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
        local ended_before=0
        if ! kill -0 "$pid" 2>/dev/null; then ended_before=1; fi
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        if ! s=$(wait_no_survivors 3); then
            why="processes of the killed run survive 3 s after SIGKILL: pids $s ($(ps -o pid=,args= -p "${s// /,}" 2>/dev/null | head -n 3 | tr '\n' '|'))"
            for p in $s; do kill -9 "$p" 2>/dev/null; done
        fi
        stored=$(count_runs "$w2")
        rm -f "$j2"
        timeout -k 5 300 "$BIN" "${KA[@]}" >"$TMP/kill-$k.out" 2>"$TMP/kill-$k.err"
        rc2=$?
        fb2=$(json_get "$j2" 'v["first_bad"]')
        if [ -z "$why" ] && { [ "$rc2" != 0 ] || [ "$fb2" != "$EXPECT" ]; }; then
            why="resumed run: exit $rc2, first_bad $fb2 (uninterrupted: $EXPECT): $(tail -n 3 "$TMP/kill-$k.err" | tr '\n' '|')"
        fi
        if [ -z "$why" ] && [ -n "$(survivors)" ]; then
            why="processes left after the resumed run: $(survivors)"
        fi
        local label="2 kill/run-$k (SIGKILL at ${delay_ms} ms, $stored run(s) stored before, resume executed $(json_get "$j2" 'v["executed"]')$( [ $ended_before = 1 ] && echo ', tool had already exited'))"
        if [ -z "$why" ]; then held "$label"; else failed "$label" "$why"; fi
    done
}

# ==============================================================================================
# Case 3: a full disk. As root: a 16 MiB tmpfs as the work dir and a build that fills it.
case3_enospc() {
    section "case 3: no space left on device"
    local fill_build="$BUILD_CMD && dd if=/dev/zero of=\"\$WORK/fill\" bs=1M count=64 2>&1"
    local w j rc fb why
    if [ "$(id -u)" = 0 ]; then
        w=$TMP/tmpfs-work; j=$TMP/enospc.json
        mkdir -p "$w"
        if mount -t tmpfs -o size=16m setrows-fi "$w" 2>"$TMP/mount.err"; then
            MOUNTED+=("$w")
            # 3a: the floor off, so the build really hits ENOSPC.
            rm -f "$SENT"
            SETROWS_MIN_FREE_MB=0 timeout -k 5 300 "$BIN" --repo "$REPO" --good "$GOOD" --bad "$BADREV" \
                --build "$fill_build" --script "touch '$SENT'; $TEST_CMD" --work-dir "$w" --json "$j" \
                >"$TMP/enospc.out" 2>"$TMP/enospc.err"
            rc=$?
            why=""
            local verdicts
            verdicts=$(find "$w/results" -name 'run-*.json' 2>/dev/null | wc -l)
            if [ "$rc" != 3 ]; then
                why="exit $rc (expected 3): $(tail -n 2 "$TMP/enospc.err" | tr '\n' '|')"
            elif [ "$verdicts" != 0 ]; then
                why="$verdicts probe run(s) stored while the disk was full: $(find "$w/results" -name 'run-*.json' | head -n 2 | xargs cat 2>/dev/null | tr -d '\n' | head -c 300)"
            elif [ -e "$SENT" ]; then
                why="the test ran although its build could not complete"
            elif [ -s "$j" ] && [ "$(json_get "$j" 'v["first_bad"]')" != null ]; then
                why="--json names a first_bad from a full disk"
            fi
            if [ -z "$why" ]; then held "3 enospc/tmpfs-16m-build-fills-it (exit 3, nothing stored)"; else failed "3 enospc/tmpfs-16m-build-fills-it" "$why"; fi
            # 3b: the default floor (1024 MiB) on the same 16 MiB: exit 3 before any step.
            local w3=$TMP/tmpfs-work/floor
            mkdir -p "$w3" 2>/dev/null
            rm -f "$SENT" "$w/fill" 2>/dev/null
            find "$w" -name fill -delete 2>/dev/null
            env -u SETROWS_MIN_FREE_MB timeout -k 5 120 "$BIN" --repo "$REPO" --good "$GOOD" --bad "$BADREV" \
                --build "touch '$SENT'; $BUILD_CMD" --script "touch '$SENT'; $TEST_CMD" --work-dir "$w3" \
                >"$TMP/floor.out" 2>"$TMP/floor.err"
            rc=$?
            why=""
            if [ "$rc" != 3 ]; then why="exit $rc (expected 3): $(tail -n 2 "$TMP/floor.err" | tr '\n' '|')"
            elif [ -e "$SENT" ]; then why="a step ran below the free-space floor"
            elif [ "$(count_runs "$w3")" != 0 ]; then why="results stored"
            fi
            if [ -z "$why" ]; then held "3 enospc/tmpfs-16m-default-floor (exit 3 before any step)"; else failed "3 enospc/tmpfs-16m-default-floor" "$why"; fi
            # 3c: move what the full disk left to a big dir, unmount, same command: the answer.
            rm -rf "$w3"
            local big=$TMP/enospc-big
            cp -a "$w" "$big" 2>/dev/null
            umount "$w" && MOUNTED=()
            rm -f "$j"
            SETROWS_MIN_FREE_MB=0 timeout -k 5 300 "$BIN" --repo "$REPO" --good "$GOOD" --bad "$BADREV" \
                --build "$fill_build" --script "touch '$SENT'; $TEST_CMD" --work-dir "$big" --json "$j" \
                >"$TMP/enospc2.out" 2>"$TMP/enospc2.err"
            rc=$?
            fb=$(json_get "$j" 'v["first_bad"]')
            if [ "$rc" = 0 ] && [ "$fb" = "$EXPECT" ]; then
                held "3 enospc/rerun-on-big-dir (same work dir contents, right answer)"
            else
                failed "3 enospc/rerun-on-big-dir" "exit $rc, first_bad $fb (expected $EXPECT): $(tail -n 2 "$TMP/enospc2.err" | tr '\n' '|')"
            fi
            rm -rf "$big"
        else
            note "cannot mount tmpfs ($(head -c 200 "$TMP/mount.err")); only the free-space floor is tested"
        fi
    else
        note "not root: no tmpfs; only the free-space floor is tested"
    fi
    # 3d (always): SETROWS_MIN_FREE_MB far above what any disk has: exit 3 before any step.
    w=$TMP/floor-work
    rm -f "$SENT"
    SETROWS_MIN_FREE_MB=1000000000 timeout -k 5 120 "$BIN" --repo "$REPO" --good "$GOOD" --bad "$BADREV" \
        --build "touch '$SENT'; $BUILD_CMD" --script "touch '$SENT'; $TEST_CMD" --work-dir "$w" --json "$TMP/floor.json" \
        >"$TMP/floor2.out" 2>"$TMP/floor2.err"
    rc=$?
    why=""
    if [ "$rc" != 3 ]; then why="exit $rc (expected 3): $(tail -n 2 "$TMP/floor2.err" | tr '\n' '|')"
    elif [ -e "$SENT" ]; then why="a step ran below the free-space floor"
    elif [ "$(count_runs "$w")" != 0 ]; then why="results stored"
    fi
    if [ -z "$why" ]; then held "3 enospc/min-free-mb-huge (exit 3 before any step)"; else failed "3 enospc/min-free-mb-huge" "$why"; fi
}

# ==============================================================================================
# Stand-in GitHub API.
start_server() { # NAME ARGS...: sets PORT, SRV_LOG, SRV_PID
    local name=$1; shift
    SRV_LOG=$TMP/gh-$name.log
    local pf=$TMP/gh-$name.port
    rm -f "$pf" "$SRV_LOG"
    python3 "$HERE/fake_github.py" --log "$SRV_LOG" --port-file "$pf" "$@" 2>"$TMP/gh-$name.srv.err" &
    SRV_PID=$!
    SERVER_PIDS+=("$SRV_PID")
    local i
    for ((i = 0; i < 100; i++)); do
        [ -s "$pf" ] && break
        sleep 0.05
    done
    PORT=$(cat "$pf" 2>/dev/null)
    [ -n "$PORT" ]
}
stop_server() { kill "$SRV_PID" 2>/dev/null; wait "$SRV_PID" 2>/dev/null; }
srv_count() { # STATUS [METHOD]: requests answered with STATUS
    python3 - "$SRV_LOG" "$1" "${2:-}" <<'PY' 2>/dev/null || echo 0
import json, sys
n = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["status"] == int(sys.argv[2]) and (not sys.argv[3] or r["method"] == sys.argv[3]):
        n += 1
print(n)
PY
}
srv_bodies() { # the request bodies the server saw (comments), never the headers
    python3 - "$SRV_LOG" <<'PY' 2>/dev/null
import json, sys
for line in open(sys.argv[1]):
    print(json.loads(line)["body"])
PY
}
srv_token_seen() { # TOKEN: did an Authorization header carry it?
    python3 - "$SRV_LOG" "$1" <<'PY' 2>/dev/null
import json, sys
print(any(sys.argv[2] in json.loads(l)["auth_header"] for l in open(sys.argv[1])))
PY
}

# ==============================================================================================
# Case 4: a hostile probe dumps every environment it can read; the token must appear nowhere.
case4_hostile() {
    section "case 4: hostile probe reads /proc/*/environ (GITHUB_TOKEN must not leak)"
    local token w j r rc why=""
    token=$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')
    w=$TMP/hostile-work; j=$TMP/hostile.json; r=$TMP/hostile.md
    if ! start_server hostile; then failed "4 hostile-probe" "stand-in GitHub did not start"; return; fi
    # Every readable environ, the parent chain's by name, and our own environment.
    local dump='echo HOSTILE-DUMP-BEGIN; for f in /proc/[0-9]*/environ; do tr "\0" "\n" <"$f" 2>/dev/null; done; cat /proc/$PPID/environ 2>/dev/null | tr "\0" "\n"; p=$$; while [ "$p" -gt 1 ] 2>/dev/null; do tr "\0" "\n" </proc/$p/environ 2>/dev/null; tr "\0" " " </proc/$p/cmdline 2>/dev/null; echo; p=$(awk "/^PPid:/{print \$2}" /proc/$p/status 2>/dev/null); done; env; echo HOSTILE-DUMP-END'
    GITHUB_TOKEN=$token timeout -k 5 300 "$BIN" --repo "$REPO" --good "$GOOD" --bad "$BADREV" \
        --build "$dump; $BUILD_CMD" --script "$dump; $TEST_CMD" --work-dir "$w" --json "$j" --report "$r" \
        --post-to o/r#1 --api-url "http://127.0.0.1:$PORT" --github-retries 1 \
        >"$TMP/hostile.out" 2>"$TMP/hostile.err"
    rc=$?
    stop_server
    local where=() f
    grep -qF "$token" "$TMP/hostile.out" && where+=(stdout)
    grep -qF "$token" "$TMP/hostile.err" && where+=(stderr)
    grep -qF "$token" "$j" 2>/dev/null && where+=(--json)
    grep -qF "$token" "$r" 2>/dev/null && where+=(--report)
    while IFS= read -r f; do where+=("${f#"$w"/}"); done < <(grep -rlF "$token" "$w" 2>/dev/null)
    srv_bodies | grep -qF "$token" && where+=("posted comment")
    local dumps
    dumps=$(grep -rl HOSTILE-DUMP-END "$w/logs" 2>/dev/null | wc -l)
    if [ ${#where[@]} -gt 0 ]; then
        why="token found in: ${where[*]}"
    elif [ "$rc" != 0 ]; then
        why="exit $rc (expected 0): $(tail -n 2 "$TMP/hostile.err" | tr '\n' '|')"
    elif [ "$(json_get "$j" 'v["first_bad"]')" != "$EXPECT" ]; then
        why="wrong answer $(json_get "$j" 'v["first_bad"]')"
    elif [ "$dumps" = 0 ]; then
        why="the hostile dump is not in any log (the check proves nothing)"
    elif [ "$(srv_token_seen "$token")" != True ]; then
        why="the stand-in never received the token (the tool did not hold it; the check proves nothing)"
    elif [ "$(srv_count 201 POST)" = 0 ]; then
        why="no comment was posted"
    fi
    if [ -z "$why" ]; then
        held "4 hostile-probe (0 occurrences in stdout, stderr, --json, --report, $(find "$w" -type f | wc -l) work-dir files, the comment; $dumps logs hold the dump)"
    else
        failed "4 hostile-probe" "$why"
    fi
}

# ==============================================================================================
# Case 5: GitHub error responses to `report --post`.
gh_case() { # NAME EXPECT_RC RETRIED(yes|no|-) SERVER-ARGS... -- EXTRA-TOOL-ARGS...
    local name=$1 want=$2 retried=$3; shift 3
    local sargs=()
    while [ "$1" != "--" ]; do sargs+=("$1"); shift; done
    shift
    local token why="" rc t0 t1
    token=$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')
    if ! start_server "$name" "${sargs[@]}"; then failed "5 github/$name" "stand-in did not start"; return; fi
    t0=$(date +%s)
    GITHUB_TOKEN=$token timeout -k 5 120 "$BIN" report --results "$REF_JSON" --post --issue o/r#1 \
        --api-url "http://127.0.0.1:$PORT" "$@" >"$TMP/gh-$name.out" 2>"$TMP/gh-$name.err"
    rc=$?
    t1=$(date +%s)
    stop_server
    local lines first errs
    lines=$(wc -l <"$TMP/gh-$name.err")
    first=$(head -n1 "$TMP/gh-$name.err")
    errs=$(srv_count "${sargs[1]}")
    if grep -qF "$token" "$TMP/gh-$name.out" "$TMP/gh-$name.err"; then
        why="the token is printed"
    elif [ "$rc" != "$want" ]; then
        why="exit $rc (expected $want): $(head -c 300 "$TMP/gh-$name.err" | tr '\n' '|')"
    elif [ "$want" != 0 ] && [ "$lines" != 1 ]; then
        why="$lines stderr lines (expected 1): $(head -c 400 "$TMP/gh-$name.err" | tr '\n' '|')"
    elif [ "$want" != 0 ] && [[ "$first" != "setrows-bisect: error:"* ]]; then
        why="stderr does not start with 'setrows-bisect: error:': ${first:0:200}"
    elif [ "$(srv_token_seen "$token")" != True ]; then
        why="the stand-in never saw the token (did the request reach it?)"
    elif [ "$retried" = yes ] && [ "$errs" -lt 2 ]; then
        why="not retried: $errs request(s) got ${sargs[1]}"
    elif [ "$retried" = no ] && [ "$errs" -gt 1 ]; then
        why="retried a non-retryable ${sargs[1]} ($errs requests)"
    elif [ "$want" = 0 ] && [ "$(srv_count 201 POST)" != 1 ]; then
        why="expected exactly one comment created, got $(srv_count 201 POST)"
    fi
    local label="5 github/$name (exit $rc, ${errs} x ${sargs[1]}, $((t1 - t0)) s)"
    if [ -z "$why" ]; then held "$label"; else failed "5 github/$name" "$why"; fi
}

case5_github() {
    section "case 5: GitHub error responses (stand-in API on 127.0.0.1)"
    if [ -z "$REF_JSON" ]; then failed "5 github" "no bisect result to post (case 2's uninterrupted run failed)"; return; fi
    gh_case 401-bad-credentials 2 no --status 401 -- --github-retries 2
    if [ "$QUICK" = 0 ]; then
        gh_case 403-forbidden 2 no --status 403 -- --github-retries 2
        gh_case 403-read-only-token 2 no --status 403 --on post --message 'Resource not accessible by integration' -- --github-retries 2
        gh_case 404-issue-not-found 2 no --status 404 --on comments -- --github-retries 2
        gh_case 422-validation-failed 3 no --status 422 --on post -- --github-retries 2
    fi
    gh_case 429-retry-after-1s-then-ok 0 yes --status 429 --count 2 --retry-after 1 -- --github-retries 4
    if [ "$QUICK" = 0 ]; then
        gh_case 429-retry-after-1s-forever 3 yes --status 429 --retry-after 1 -- --github-retries 2
        gh_case 429-retry-after-over-max-wait 3 - --status 429 --retry-after 3600 -- --github-retries 2 --github-max-wait 5
        gh_case 500-server-error 3 yes --status 500 -- --github-retries 2
        gh_case 503-retry-after-1s-then-ok 0 yes --status 503 --count 2 --retry-after 1 -- --github-retries 4
    fi
    gh_case 503-forever 3 yes --status 503 --retry-after 1 -- --github-retries 2
}

# ==============================================================================================
case1_bad_inputs
case2_kills
case3_enospc
case4_hostile
case5_github

ELAPSED=$(( $(date +%s) - START_TS ))
echo
echo "tally: tried $TRIED, held $HELD, failed $((TRIED - HELD))  ($( [ "$QUICK" = 1 ] && echo quick || echo full ), seed $SEED, ${ELAPSED} s)"
for l in "${FAILED_LINES[@]}"; do
    echo "FAILED $l"
done
[ "$HELD" = "$TRIED" ] && [ "$TRIED" -gt 0 ]

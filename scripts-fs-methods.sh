#!/bin/sh
# Call-site rewrites of the fusefs reshape (syscall room, FS methods onto
# named fields). Idempotent: run from the repository root after merging.
set -e
cd "$(dirname "$0")"
F=$(ls fusefs/*.go)
# syscall room: syscallcompat.Dir's exported fields and method.
sed -i -E \
  -e 's/\bdirFd\{fd:/dirFd{FD:/g' \
  -e 's/\b(d|d1|d2|parent|src|dir|at)\.fd\b/\1.FD/g' \
  -e 's/\bd\.own\b/d.Own/g' \
  -e 's/\b(d|d1|d2|parent|src|dir)\.close\(\)/\1.Close()/g' \
  -e 's/\bdirFd\{FD: ([a-z]+), own:/dirFd{FD: \1, Own:/g' \
  -e 's/\bat\[([0-9])\]\.fd\b/at[\1].FD/g' \
  -e 's/\bd\.close, 0$/d.Close, 0/' \
  $F
# FS methods onto named fields of FS (never embedded) or plain functions.
sed -i -E \
  -e 's/\b(f|fs)\.(rootDir|openDir|prepareAt|lstatRel|stableAttr|openForHashAt)\(/\1.bk.\2(/g' \
  -e 's/\b(f|fs)\.(rootFd|rootDev)\b/\1.bk.\2/g' \
  -e 's/\b(f|fs)\.(trackFile|closeHandles|keepDir)\(/\1.handles.\2(/g' \
  -e 's/\b(f|fs)\.(afterRelease|releaseDone)\(/\1.released.\2(/g' \
  -e 's/\b(f|fs)\.(ownChange|ownMove|pinRules|invalidateRules|settleDeferred|settleDeferredOf|settleDeferredNode)\(/\1.oc.\2(/g' \
  -e 's/\b(h\.f|f)\.ctlCaller\(/ctlCaller(\1.cfg.Owner, /g' \
  -e 's/\bf\.fuseLogger\(/fuseLogger(f.log, /g' \
  $F

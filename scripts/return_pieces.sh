#!/usr/bin/env bash
# A file that a call of the lent GPU machine writes under $OUT comes back only if it is at most 16 MiB (the device
# tool's README, Limits): a larger one is left out of what comes back, and the call's work with it unless the machine
# is still warm. So: FILE stays as it is when it is at most BYTES (default 15,000,000, under 16 MiB with margin);
# otherwise it becomes FILE.part00, FILE.part01, ... of at most BYTES each, and FILE goes. Back here,
# `cat FILE.part* > FILE` restores it.
#
#   scripts/return_pieces.sh FILE [BYTES]
set -eu
FILE=$1
BYTES=${2:-15000000}
SIZE=$(stat -c %s "$FILE")
if [ "$SIZE" -gt "$BYTES" ]; then
    split -b "$BYTES" -d "$FILE" "$FILE.part"
    rm "$FILE"
    echo "$FILE: $SIZE bytes, returned in $(ls "$FILE".part* | wc -l) pieces: cat $(basename "$FILE").part* > $(basename "$FILE")"
fi

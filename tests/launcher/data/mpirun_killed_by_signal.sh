#!/bin/sh
# Stands in for mpirun (FATHOM_MPIRUN) and dies from SIGTERM: fathom must exit with 128 + 15.
kill -TERM $$

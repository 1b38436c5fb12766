#!/bin/bash
# A channel memory's death with a standby (cmrun --cm-standby): the cases
# of ft_cm_death.sh, in every mode, where each CM's first death is taken
# over by its standby (the journal it was mirrored) and a second one
# restarts the CM on the standby's journal.
CM_DEATH_STANDBY=1 exec bash "$(dirname "$0")/ft_cm_death.sh" "$@"

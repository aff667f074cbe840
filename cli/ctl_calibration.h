/* ctl_calibration.h — agent.calibration side by side: the policy's prices
 * (assumed), the engine's measured ones and what the gateway charges, as
 * `fairgatectl status` and `fairgatectl plan --calibrated` print them. */
#ifndef FG_CLI_CTL_CALIBRATION_H
#define FG_CLI_CTL_CALIBRATION_H

#include <jansson.h>

/* The status reply's "calibration" object, as a table on stdout. */
void fg_show_calibration(const json_t *cal);

/* The running agent's calibration object (new reference), or NULL with
 * the reason on stderr. `ctl` NULL = the default socket. */
json_t *fg_fetch_calibration(const char *ctl);

#endif

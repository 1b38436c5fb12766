#include "units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int cm_parse_long(const char *text, long min, long max, long *out)
{
	char *end;
	/* strtol alone would take leading blanks and a '+': one spelling per
	 * number, so every component accepts and refuses the same text. */
	if (text == NULL || !(isdigit((unsigned char)text[0]) ||
	                      (text[0] == '-' && isdigit((unsigned char)text[1]))))
		return -1;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (errno || *end != '\0' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int cm_parse_size(const char *text, uint64_t *out)
{
	char *end;
	if (text == NULL || !isdigit((unsigned char)*text))
		return -1;
	errno = 0;
	unsigned long long v = strtoull(text, &end, 10);
	if (errno)
		return -1;
	unsigned shift = 0;
	switch (toupper((unsigned char)*end)) {
	case 'K':
		shift = 10;
		end++;
		break;
	case 'M':
		shift = 20;
		end++;
		break;
	case 'G':
		shift = 30;
		end++;
		break;
	default:
		break;
	}
	if (shift && (strcasecmp(end, "iB") == 0 || strcasecmp(end, "B") == 0))
		end += strlen(end);
	else if (!shift && strcasecmp(end, "B") == 0)
		end++;
	if (*end != '\0')
		return -1;
	if (shift && v > (UINT64_MAX >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

int cm_parse_duration(const char *text, uint64_t *out_ns)
{
	char *end;
	if (text == NULL || !(isdigit((unsigned char)*text) || *text == '.'))
		return -1;
	errno = 0;
	double v = strtod(text, &end);
	if (errno || end == text || !isfinite(v) || v < 0)
		return -1;
	double scale;
	if (*end == '\0' || strcmp(end, "s") == 0)
		scale = 1e9;
	else if (strcmp(end, "ms") == 0)
		scale = 1e6;
	else if (strcmp(end, "us") == 0)
		scale = 1e3;
	else if (strcmp(end, "ns") == 0)
		scale = 1;
	else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
		scale = 60e9;
	else if (strcmp(end, "h") == 0)
		scale = 3600e9;
	else
		return -1;
	double ns = v * scale;
	if (ns > 9.2e18)
		return -1;
	*out_ns = (uint64_t)ns;
	return 0;
}

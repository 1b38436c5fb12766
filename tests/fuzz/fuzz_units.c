/* libFuzzer target: the number parsers every command line, environment
 * variable and control line goes through (common/units.c, and the address
 * parser of common/net.c). Accepted text must mean what it says: a number
 * cm_parse_long accepts prints back to the same text, or to it without
 * leading zeros. */
#include "config.h"

#include "net.h"
#include "units.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 256)
		return 0;
	char *text = strndup((const char *)data, size);
	if (text == NULL)
		return 0;
	long v;
	if (cm_parse_long(text, -1000000, 1000000, &v) == 0) {
		if (v < -1000000 || v > 1000000)
			abort();
		char back[32];
		snprintf(back, sizeof back, "%ld", v);
		const char *digits = text + (text[0] == '-');
		while (digits[0] == '0' && digits[1] != '\0')
			digits++;
		if (strcmp(back + (v < 0), digits) != 0 || (v < 0 && text[0] != '-'))
			abort();
	}
	uint64_t u;
	(void)cm_parse_size(text, &u);
	(void)cm_parse_duration(text, &u);
	struct sockaddr_in sa;
	(void)cm_parse_hostport(text, 7000, &sa);
	free(text);
	return 0;
}

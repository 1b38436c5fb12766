/* libFuzzer target: cmrun's control-line parser (dispatcher/ctrl_line.c),
 * fed what a control connection or the control pipe may carry: lines
 * split at newlines, for a job whose size the first two bytes pick. A
 * line that parses must name a rank and replica inside the job. */
#include "config.h"

#include "ctrl_line.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2 || size > 4096)
		return 0;
	int nranks = 1 + data[0] % 16, replicas = 1 + data[1] % 3;
	char *text = malloc(size - 1);
	if (text == NULL)
		return 0;
	memcpy(text, data + 2, size - 2);
	text[size - 2] = '\0';
	for (char *line = text, *nl; line; line = nl) {
		nl = strchr(line, '\n');
		if (nl)
			*nl++ = '\0';
		struct ctrl_line l;
		enum ctrl_kind k = ctrl_line_parse(line, nranks, replicas, &l);
		if (k != CTRL_BAD &&
		    (l.rank < 0 || l.rank >= nranks ||
		     (k != CTRL_ABORT && (l.replica < 0 || l.replica >= replicas))))
			abort();
	}
	free(text);
	return 0;
}

/* The status line (status_line.h). */
#include <config.h>

#include "status_line.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "net.h"
#include "output.h"

static struct {
	pthread_mutex_t mu;
	bool enabled;
	bool couple_stdout; /* stdout is a terminal too: its lines share the screen */
	char text[512];
	size_t len;
	bool dirty;   /* text not drawn since it changed (or since it was erased) */
	bool visible; /* drawn, and the cursor is at its end */
	bool final;   /* draw once more, with a newline, then forget it */
	bool at_line_start[2];
	bool broken;
} status = {.mu = PTHREAD_MUTEX_INITIALIZER, .at_line_start = {true, true}};

static void status_write(const char *data, size_t len)
{
	if (!status.broken && cm_write_full(STDERR_FILENO, data, len) < 0)
		status.broken = true;
}

/* mu held. */
static void status_redraw(void)
{
	if (!status.dirty || status.len == 0)
		return;
	if (!status.at_line_start[OUT_STDERR] ||
	    (status.couple_stdout && !status.at_line_start[OUT_STDOUT])) {
		if (!status.final)
			return; /* mid-line: after its newline */
		status_write("\n", 1);
		status.at_line_start[OUT_STDERR] = true;
	}
	status_write("\r", 1);
	status_write(status.text, status.len);
	status_write(status.final ? "\033[K\n" : "\033[K", status.final ? 4 : 3);
	status.visible = !status.final;
	status.dirty = false;
	if (status.final)
		status.len = 0;
}

bool status_line_write(int which, int fd, const char *data, size_t len, bool broken)
{
	pthread_mutex_lock(&status.mu);
	bool affects = status.enabled && (which == OUT_STDERR || status.couple_stdout);
	if (!affects) {
		pthread_mutex_unlock(&status.mu);
		return broken || cm_write_full(fd, data, len) < 0;
	}
	if (status.visible) {
		status_write("\r\033[K", 4);
		status.visible = false;
		status.dirty = true;
	}
	if (!broken && cm_write_full(fd, data, len) < 0)
		broken = true;
	if (len > 0)
		status.at_line_start[which] = data[len - 1] == '\n';
	status_redraw();
	pthread_mutex_unlock(&status.mu);
	return broken;
}

void status_line_redraw(void)
{
	pthread_mutex_lock(&status.mu);
	status_redraw();
	pthread_mutex_unlock(&status.mu);
}

void status_line_set(const char *text, bool final)
{
	pthread_mutex_lock(&status.mu);
	if (!status.enabled) {
		status.enabled = true;
		/* stdout on the same screen: its lines must not run into ours. */
		status.couple_stdout = isatty(STDOUT_FILENO) && isatty(STDERR_FILENO);
	}
	size_t len = strlen(text);
	if (len >= sizeof status.text)
		len = sizeof status.text - 1;
	memcpy(status.text, text, len);
	status.len = len;
	status.final = final;
	status.dirty = true;
	pthread_mutex_unlock(&status.mu);
}

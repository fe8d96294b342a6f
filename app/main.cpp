// attnscope entry point: everything happens in the command-line dispatcher.
#include "cli/cli.h"

int main(int argc, char** argv) { return app::runCli(argc, argv); }

// Ctrl+C, SIGTERM and SIGHUP for the command line and the window. Left to their default, they
// ended the process where it stood, and an export's temporary files (".NAME.ssaviz-*") stayed in
// --out. While an Interrupts lives, an interrupt removes what the process was writing
// (model::RemoveUnfinishedTemporaries: whatever was put in place stays whole) and ends it with 130
// and one line. Signals ignored when it starts (nohup, a script's `&`) stay ignored.
#pragma once

#include <atomic>
#include <string>

namespace app {

// What an interrupt leaves that its line should say (a batch: which texts are in place, beside
// an earlier batch's summary); "" for nothing. Said after "interrupted".
void SetInterruptNote(std::string note);

class Interrupts {
public:
    Interrupts();
    ~Interrupts();
    Interrupts(const Interrupts&) = delete;
    Interrupts& operator=(const Interrupts&) = delete;
};

// For work that can stop at its next step (train): while one lives, the first interrupt only sets
// `stop`; the next, a second or more later, ends the process as above. One within that second is
// the same interrupt delivered twice (`timeout` and some supervisors signal the process and then
// its group).
class StopAtNextStep {
public:
    explicit StopAtNextStep(std::atomic<bool>* stop);
    ~StopAtNextStep();
    StopAtNextStep(const StopAtNextStep&) = delete;
    StopAtNextStep& operator=(const StopAtNextStep&) = delete;
};

}  // namespace app

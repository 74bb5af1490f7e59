// metrics_cuda.h's FlashRows for three sides (a base beside the comparison): flash_launch.cuh.
#include "model/nn/flash_launch.cuh"

namespace model::cuda {

const char* FlashRowsOfThreeSides(const FlashArgs& a) { return LaunchSides<3>(a); }

}  // namespace model::cuda

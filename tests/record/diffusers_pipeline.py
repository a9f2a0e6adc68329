"""A diffusers pipeline (DDPM, a small UNet2DModel: convolutions, attention, group norms), two denoising steps."""
import torch
from diffusers import DDPMPipeline, DDPMScheduler, UNet2DModel

torch.manual_seed(0)
unet = UNet2DModel(sample_size=64, in_channels=3, out_channels=3, layers_per_block=1,
                   block_out_channels=(32, 64), down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                   up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=8)
pipe = DDPMPipeline(unet=unet, scheduler=DDPMScheduler(num_train_timesteps=1000)).to("cuda")
images = pipe(batch_size=4, num_inference_steps=2, output_type="np").images
print("images", images.shape)
